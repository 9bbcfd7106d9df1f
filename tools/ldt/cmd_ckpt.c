/* ldt ckpt: offline tools for sharded checkpoints: merge into one safetensors file, info,
 * and Hugging Face GPT-2 weights in (import-hf) and out (export-hf). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ldt/ldt.h"
#include "tools/ldt/cli.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: ldt ckpt merge DIR OUT.safetensors\n"
            "       ldt ckpt info DIR [--json]\n"
            "       ldt ckpt import-hf SRC OUT_DIR [--mesh M] [--heads A] [--dtype D]\n"
            "       ldt ckpt export-hf DIR OUT.safetensors [--dtype D]\n\n"
            "DIR is a sharded checkpoint: manifest.json and the rank files it lists (or, saved\n"
            "before manifests, rank-<r>.safetensors files); docs/checkpoint.md.\n"
            "  merge  writes every full tensor into one single-device safetensors file that\n"
            "         standard tools read (Python's safetensors, numpy); no mesh is needed.\n"
            "         Every shard's checksum and the coverage of every tensor are verified.\n"
            "         OUT must lie outside DIR.\n"
            "  info   lists the tensors: dtype, global shape, mesh, placements, each stored\n"
            "         shard (rank, local shape, region) and sizes, and any file in DIR that\n"
            "         is not part of the checkpoint.\n"
            "  import-hf  GPT-2 weights (Hugging Face safetensors) into a checkpoint that the\n"
            "         built-in gpt loads (ldt train --load / --resume, ldt run --load).\n"
            "  export-hf  a gpt checkpoint back into one Hugging Face GPT-2 safetensors file.\n"
            "ldt ckpt SUBCOMMAND --help describes each.\n");
}

static void usage_import(FILE *f) {
    fprintf(f,
            "usage: ldt ckpt import-hf SRC OUT_DIR [--mesh M] [--heads A] [--dtype D]\n\n"
            "Reads Hugging Face GPT-2 weights (SRC: a .safetensors file, or a directory holding\n"
            "model.safetensors.index.json and its shards, or model.safetensors) and writes the\n"
            "sharded checkpoint OUT_DIR for the built-in gpt, sharded on M as the megatron pins\n"
            "(any mesh loads it: loads reshard). Conv1D weights [in, out] become [out, in];\n"
            "layers, hidden, vocab and positions come from the shapes. Prints the configuration.\n\nflags:\n"
            "  --mesh M               the mesh the checkpoint is sharded on (default 1)\n"
            "  --heads A              attention heads (default: n_head of the config.json beside SRC)\n"
            "  --dtype D              the model dtype: f32 (default), f64, f16 or bf16\n"
            "  --help, -h             this help\n");
}

static void usage_export(FILE *f) {
    fprintf(f,
            "usage: ldt ckpt export-hf DIR OUT.safetensors [--dtype D]\n\n"
            "Writes the gpt checkpoint DIR as one Hugging Face GPT-2 safetensors file (HF names,\n"
            "Conv1D weights [in, out], tensors sorted by name). An unmodified import exports the\n"
            "source's tensors bit for bit.\n\nflags:\n"
            "  --dtype D              f32, f16 or bf16 (default: the dtype import-hf read; f32)\n"
            "  --help, -h             this help\n");
}

static int is_help(const char *a) { return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0; }

/* ldt ckpt import-hf / export-hf. */
static int cmd_hf(int argc, char **argv) {
    const char *pos[2], *mesh_s = "1", *dt_s = NULL;
    int npos = 0, import = strcmp(argv[0], "import-hf") == 0;
    int64_t heads = 0;
    ldt_dtype dt = import ? LDT_F32 : LDT_DTYPE_COUNT;
    for (int i = 1; i < argc; i++) {
        if (is_help(argv[i])) {
            (import ? usage_import : usage_export)(stdout);
            return 0;
        }
        if (strcmp(argv[i], "--dtype") == 0 || (import && (strcmp(argv[i], "--mesh") == 0 || strcmp(argv[i], "--heads") == 0))) {
            if (i + 1 >= argc) {
                fprintf(stderr, "ldt ckpt %s: %s needs a value\n", argv[0], argv[i]);
                return 2;
            }
            if (strcmp(argv[i], "--dtype") == 0) dt_s = argv[++i];
            else if (strcmp(argv[i], "--mesh") == 0) mesh_s = argv[++i];
            else {
                char *end;
                heads = strtoll(argv[++i], &end, 10);
                if (*end || heads < 1) {
                    fprintf(stderr, "ldt ckpt import-hf: --heads is '%s', expected a positive integer\n", argv[i]);
                    return 2;
                }
            }
        } else if (strncmp(argv[i], "--", 2) == 0) {
            fprintf(stderr, "ldt ckpt %s: unknown flag '%s' (see ldt ckpt %s --help)\n", argv[0], argv[i], argv[0]);
            return 2;
        } else if (npos < 2) pos[npos++] = argv[i];
        else {
            fprintf(stderr, "ldt ckpt %s: unexpected argument '%s' (see ldt ckpt %s --help)\n", argv[0], argv[i], argv[0]);
            return 2;
        }
    }
    if (npos != 2) {
        fprintf(stderr, "ldt ckpt %s: expected %s\n\n", argv[0], import ? "SRC and OUT_DIR" : "DIR and OUT.safetensors");
        (import ? usage_import : usage_export)(stderr);
        return 2;
    }
    if (dt_s && (ldt_dtype_parse(dt_s, &dt) != LDT_OK || !ldt_dtype_is_float(dt) || (!import && dt == LDT_F64))) {
        fprintf(stderr, "ldt ckpt %s: --dtype %s, expected %s\n", argv[0], dt_s, import ? "f32, f64, f16 or bf16" : "f32, f16 or bf16");
        return 2;
    }
    if (import) {
        ldt_mesh *mesh;
        ldt_hf_options o = {heads, dt};
        ldt_model_config c;
        char mt[256];
        if (ldt_mesh_parse(mesh_s, LDT_DEVICE_CPU, &mesh) != LDT_OK) return cli_fail("ckpt import-hf");
        if (ldt_hf_import(pos[0], pos[1], mesh, &o, &c) != LDT_OK) {
            ldt_mesh_destroy(mesh);
            return cli_fail("ckpt import-hf");
        }
        ldt_mesh_format(mesh, mt, sizeof mt);
        ldt_mesh_destroy(mesh);
        printf("imported %s into %s on mesh %s: gpt layers %lld, hidden %lld, heads %lld, vocab %lld, positions %lld, %s\n",
               pos[0], pos[1], mt, (long long)c.layers, (long long)c.hidden, (long long)c.heads, (long long)c.vocab,
               (long long)c.positions, ldt_dtype_name(c.dtype));
        return 0;
    }
    if (ldt_hf_export(pos[0], pos[1], dt) != LDT_OK) return cli_fail("ckpt export-hf");
    printf("exported %s to %s\n", pos[0], pos[1]);
    return 0;
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


int cmd_ckpt(int argc, char **argv) {
    const char *pos[2];
    int npos = 0, json = 0, help = 0;
    if (argc < 1 || is_help(argv[0])) {
        usage(argc < 1 ? stderr : stdout);
        return argc < 1 ? 2 : 0;
    }
    if (strcmp(argv[0], "import-hf") == 0 || strcmp(argv[0], "export-hf") == 0) return cmd_hf(argc, argv);
    if (strcmp(argv[0], "merge") != 0 && strcmp(argv[0], "info") != 0) {
        fprintf(stderr, "ldt ckpt: unknown subcommand '%s', expected merge, info, import-hf or export-hf\n\n", argv[0]);
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
