/* ldt ckpt: offline tools for sharded checkpoints: merge into one safetensors file, info. */
#include <stdio.h>
#include <string.h>

#include "ldt/exec.h"
#include "tools/ldt/cli.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: ldt ckpt merge DIR OUT.safetensors\n"
            "       ldt ckpt info DIR [--json]\n\n"
            "DIR is a sharded checkpoint: manifest.json and the rank files it lists (or, saved\n"
            "before manifests, rank-<r>.safetensors files); docs/checkpoint.md.\n"
            "  merge  writes every full tensor into one single-device safetensors file that\n"
            "         standard tools read (Python's safetensors, numpy); no mesh is needed.\n"
            "         Every shard's checksum and the coverage of every tensor are verified.\n"
            "         OUT must lie outside DIR.\n"
            "  info   lists the tensors: dtype, global shape, mesh, placements, each stored\n"
            "         shard (rank, local shape, region) and sizes, and any file in DIR that\n"
            "         is not part of the checkpoint.\n"
            "ldt ckpt merge --help and ldt ckpt info --help describe each.\n");
}

static void usage_merge(FILE *f) {
    fprintf(f,
            "usage: ldt ckpt merge DIR OUT.safetensors\n\n"
            "Writes every full tensor of the sharded checkpoint DIR into one single-device\n"
            "safetensors file (names sorted, data contiguous) that standard tools read; no mesh\n"
            "is needed. Every shard's checksum and the coverage of every tensor are verified.\n"
            "OUT must lie outside DIR. Prints \"merged DIR into OUT\".\n\nflags:\n"
            "  --help, -h             this help\n");
}

static void usage_info(FILE *f) {
    fprintf(f,
            "usage: ldt ckpt info DIR [--json]\n\n"
            "Lists the tensors of the sharded checkpoint DIR: dtype, global shape, mesh,\n"
            "placements, each stored shard (rank, local shape, region) and sizes, and any file in\n"
            "DIR that is not part of the checkpoint. Headers are checked; the data is not read.\n\nflags:\n"
            "  --json                 one JSON object (keys in docs/cli.md)\n"
            "  --help, -h             this help\n");
}

static int is_help(const char *a) { return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0; }

int cmd_ckpt(int argc, char **argv) {
    const char *pos[2];
    int npos = 0, json = 0, help = 0;
    if (argc < 1 || is_help(argv[0])) {
        usage(argc < 1 ? stderr : stdout);
        return argc < 1 ? 2 : 0;
    }
    if (strcmp(argv[0], "merge") != 0 && strcmp(argv[0], "info") != 0) {
        fprintf(stderr, "ldt ckpt: unknown subcommand '%s', expected merge or info\n\n", argv[0]);
        usage(stderr);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        if (is_help(argv[i])) help = 1;
        else if (strcmp(argv[i], "--json") == 0 && strcmp(argv[0], "info") == 0) json = 1;
        else if (strncmp(argv[i], "--", 2) == 0) {
            fprintf(stderr, "ldt ckpt %s: unknown flag '%s' (see ldt ckpt %s --help)\n", argv[0], argv[i], argv[0]);
            return 2;
        } else if (npos < 2) pos[npos++] = argv[i];
        else {
            fprintf(stderr, "ldt ckpt %s: unexpected argument '%s' (see ldt ckpt %s --help)\n", argv[0], argv[i],
                    argv[0]);
            return 2;
        }
    }
    if (strcmp(argv[0], "merge") == 0) {
        if (help) {
            usage_merge(stdout);
            return 0;
        }
        if (npos != 2) {
            fprintf(stderr, "ldt ckpt merge: expected DIR and OUT.safetensors\n\n");
            usage_merge(stderr);
            return 2;
        }
        if (ldt_ckpt_merge(pos[0], pos[1]) != LDT_OK) return cli_fail("ckpt merge");
        printf("merged %s into %s\n", pos[0], pos[1]);
        return 0;
    }
    if (help) {
        usage_info(stdout);
        return 0;
    }
    if (npos != 1) {
        fprintf(stderr, "ldt ckpt info: expected DIR\n\n");
        usage_info(stderr);
        return 2;
    }
    if ((json ? ldt_ckpt_info_json(pos[0], stdout) : ldt_ckpt_info(pos[0], stdout)) != LDT_OK)
        return cli_fail("ckpt info");
    return 0;
}
