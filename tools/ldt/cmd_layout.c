/* ldt layout: each rank's local shape and global region for a mesh, shape and placements. */
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "ldt/core.h"
#include "tools/ldt/cli.h"

#define NFLAGS 6

static cJSON *int_array(const int64_t *v, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[i]));
    return a;
}

static void fmt_vec(const int64_t *v, int n, char *buf, size_t cap) {
    ldt_shape s = {n, {0}};
    for (int i = 0; i < n; i++) s.dims[i] = v[i];
    ldt_shape_format(&s, buf, cap);
}

static int help(void) {
    cli_flag flags[NFLAGS] = {
        {"mesh", 1, "device mesh: 4, 2x3, dp=2,tp=2 or [[0,2],[1,3]] (required)", NULL},
        {"shape", 1, "global tensor shape, e.g. 7,5 (required)", NULL},
        {"placements", 1, "one per mesh dim: S<d>, R, P, Pavg, Pmax, Pmin, IS<d>:<k> (required)",
         NULL},
        {"dtype", 1, "element type (default f32): f32 f64 f16 bf16 i32 i64 u8 bool", NULL},
        {"json", 0, "print exactly one JSON object", NULL},
        {"help", 0, "this help", NULL},
    };
    printf("usage: ldt layout --mesh M --shape S --placements P [--dtype T] [--json]\n\n"
           "Prints each rank's local shape and the region of the global tensor it holds.\n"
           "Uneven dims follow torch.chunk (chunks of ceil(n/k), trailing ranks short or empty);\n"
           "a dim sharded on several mesh dims splits outer mesh dim first; IS<d>:<k> views\n"
           "dim d as k blocks and shards each (its region is a list of slices).\n\nflags:\n");
    cli_print_flags(stdout, flags, NFLAGS);
    return 0;
}

int cmd_layout(int argc, char **argv) {
    cli_flag flags[NFLAGS] = {
        {"mesh", 1, "", NULL},  {"shape", 1, "", NULL}, {"placements", 1, "", NULL},
        {"dtype", 1, "", NULL}, {"json", 0, "", NULL},  {"help", 0, "", NULL},
    };
    ldt_mesh *mesh = NULL;
    ldt_shape shape;
    ldt_placement pl[LDT_MAX_DIMS];
    ldt_spec spec;
    ldt_dtype dt = LDT_F32;
    int npl, rc = 1, *order = NULL, nranks;
    char buf[512];
    cJSON *root = NULL, *ranks = NULL;
    if (cli_parse("layout", argc, argv, flags, NFLAGS)) return 2;
    if (cli_has(flags, NFLAGS, "help")) return help();
    for (int i = 0; i < 3; i++)
        if (!flags[i].value) {
            fprintf(stderr, "ldt layout: --%s is required (see ldt layout --help)\n",
                    flags[i].name);
            return 2;
        }
    if (ldt_shape_parse(cli_get(flags, NFLAGS, "shape"), &shape) != LDT_OK ||
        ldt_mesh_parse(cli_get(flags, NFLAGS, "mesh"), LDT_DEVICE_META, &mesh) != LDT_OK ||
        ldt_placements_parse(cli_get(flags, NFLAGS, "placements"), shape.ndim, pl, LDT_MAX_DIMS,
                             &npl) != LDT_OK ||
        (cli_has(flags, NFLAGS, "dtype") &&
         ldt_dtype_parse(cli_get(flags, NFLAGS, "dtype"), &dt) != LDT_OK) ||
        ldt_spec_init(&spec, mesh, &shape, pl, npl, dt) != LDT_OK) {
        rc = cli_fail("layout");
        goto done;
    }
    nranks = ldt_mesh_nranks(mesh);
    /* list ranks by rank number, whatever order the mesh array holds them in */
    order = malloc((size_t)nranks * sizeof *order);
    if (!order) goto done;
    for (int i = 0; i < nranks; i++) order[i] = ldt_mesh_rank_at(mesh, i);
    for (int i = 1; i < nranks; i++)
        for (int j = i; j > 0 && order[j - 1] > order[j]; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    if (cli_has(flags, NFLAGS, "json")) {
        int64_t mdims[LDT_MAX_DIMS];
        for (int d = 0; d < ldt_mesh_ndim(mesh); d++) mdims[d] = ldt_mesh_dim_size(mesh, d);
        root = cJSON_CreateObject();
        ldt_mesh_format(mesh, buf, sizeof buf);
        cJSON_AddStringToObject(root, "mesh", buf);
        cJSON_AddItemToObject(root, "mesh_shape", int_array(mdims, ldt_mesh_ndim(mesh)));
        cJSON_AddItemToObject(root, "shape", int_array(shape.dims, shape.ndim));
        ldt_placements_format(spec.placements, spec.nplace, buf, sizeof buf);
        cJSON_AddStringToObject(root, "placements", buf);
        cJSON_AddStringToObject(root, "dtype", ldt_dtype_name(dt));
        ranks = cJSON_AddArrayToObject(root, "ranks");
    } else {
        ldt_spec_format(&spec, buf, sizeof buf);
        printf("%s\n%-6s %-12s %-16s %-16s %s\n", buf, "rank", "coord", "local_shape", "offset",
               "slices");
    }
    for (int i = 0; i < nranks; i++) {
        int64_t coord[LDT_MAX_DIMS], off[LDT_MAX_DIMS], sh[LDT_MAX_DIMS];
        ldt_region reg;
        int interleaved = 0;
        if (ldt_mesh_coord(mesh, order[i], coord) != LDT_OK ||
            ldt_layout(&spec, order[i], &reg) != LDT_OK) {
            rc = cli_fail("layout");
            goto done;
        }
        for (int d = 0; d < reg.ndim; d++) interleaved |= reg.runs[d].blocks > 1;
        if (root) {
            cJSON *r = cJSON_CreateObject();
            cJSON_AddNumberToObject(r, "rank", order[i]);
            cJSON_AddItemToObject(r, "coord", int_array(coord, ldt_mesh_ndim(mesh)));
            cJSON_AddItemToObject(r, "local_shape", int_array(reg.local_shape.dims, reg.ndim));
            cJSON_AddItemToObject(r, "offset", int_array(reg.offset, reg.ndim));
            if (interleaved) {
                cJSON *sl = cJSON_AddArrayToObject(r, "slices");
                for (int64_t k = 0; k < reg.nslices; k++) {
                    cJSON *o = cJSON_CreateObject();
                    ldt_region_slice(&reg, k, off, sh);
                    cJSON_AddItemToObject(o, "offset", int_array(off, reg.ndim));
                    cJSON_AddItemToObject(o, "shape", int_array(sh, reg.ndim));
                    cJSON_AddItemToArray(sl, o);
                }
            }
            cJSON_AddItemToArray(ranks, r);
        } else {
            char c[64], ls[128], of[128];
            fmt_vec(coord, ldt_mesh_ndim(mesh), c, sizeof c);
            ldt_shape_format(&reg.local_shape, ls, sizeof ls);
            fmt_vec(reg.offset, reg.ndim, of, sizeof of);
            printf("%-6d %-12s %-16s %-16s", order[i], c, ls, of);
            if (interleaved)
                for (int64_t k = 0; k < reg.nslices; k++) {
                    char so[128], ss[128];
                    ldt_region_slice(&reg, k, off, sh);
                    fmt_vec(off, reg.ndim, so, sizeof so);
                    fmt_vec(sh, reg.ndim, ss, sizeof ss);
                    printf("%s%s+%s", k ? " " : "", so, ss);
                }
            printf("\n");
        }
    }
    if (root) {
        char *text = cJSON_PrintUnformatted(root);
        if (!text) goto done;
        printf("%s\n", text);
        cJSON_free(text);
    }
    rc = 0;
done:
    cJSON_Delete(root);
    free(order);
    ldt_mesh_destroy(mesh);
    return rc;
}
