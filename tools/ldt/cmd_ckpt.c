/* ldt ckpt: offline tools for sharded checkpoints: merge into one safetensors file, info. */
#include <stdio.h>
#include <string.h>

#include "ldt/exec.h"
#include "tools/ldt/cli.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: ldt ckpt merge DIR OUT.safetensors\n"
            "       ldt ckpt info DIR\n\n"
            "DIR is a sharded checkpoint: manifest.json and the rank files it lists (or, saved\n"
            "before manifests, rank-<r>.safetensors files); docs/checkpoint.md.\n"
            "  merge  writes every full tensor into one single-device safetensors file that\n"
            "         standard tools read (Python's safetensors, numpy); no mesh is needed.\n"
            "         Every shard's checksum and the coverage of every tensor are verified.\n"
            "         OUT must lie outside DIR.\n"
            "  info   lists the tensors: dtype, global shape, mesh, placements, each stored\n"
            "         shard (rank, local shape, region) and sizes, and any file in DIR that\n"
            "         is not part of the checkpoint.\n");
}

int cmd_ckpt(int argc, char **argv) {
    for (int i = 0; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        }
    if (argc >= 1 && strcmp(argv[0], "merge") == 0) {
        if (argc != 3) {
            fprintf(stderr, "ldt ckpt merge: expected DIR and OUT.safetensors\n\n");
            usage(stderr);
            return 2;
        }
        if (ldt_ckpt_merge(argv[1], argv[2]) != LDT_OK) return cli_fail("ckpt merge");
        printf("merged %s into %s\n", argv[1], argv[2]);
        return 0;
    }
    if (argc >= 1 && strcmp(argv[0], "info") == 0) {
        if (argc != 2) {
            fprintf(stderr, "ldt ckpt info: expected DIR\n\n");
            usage(stderr);
            return 2;
        }
        if (ldt_ckpt_info(argv[1], stdout) != LDT_OK) return cli_fail("ckpt info");
        return 0;
    }
    if (argc >= 1) fprintf(stderr, "ldt ckpt: unknown subcommand '%s'\n\n", argv[0]);
    usage(stderr);
    return 2;
}
