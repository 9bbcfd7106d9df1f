/* ldt spec: a spec's placements in other systems' notations (ColossalAI, torch_xla, HLO). */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "ldt/core.h"
#include "tools/ldt/cli.h"

#define NFLAGS 8

/* The four forms; each is text, or NULL with why it cannot be written. */
enum { F_PLACEMENTS, F_COLOSSAL, F_XLA, F_HLO, F_COUNT };
static const char *const k_names[F_COUNT] = {"placements", "colossal", "xla", "hlo"};

typedef struct form {
    char *text;
    char why[512];
} form;

static int help(void) {
    cli_flag flags[NFLAGS] = {
        {"mesh", 1, "device mesh: 4, 2x4, dp=2,tp=4 or [[0,2],[1,3]] (required)", NULL},
        {"shape", 1, "global tensor shape, e.g. 4,8,8 (required)", NULL},
        {"placements", 1, "ours, one per mesh dim: S<d>, R (e.g. R,S0)", NULL},
        {"from-colossal", 1, "ColossalAI/Alpa, one per tensor dim: '[S01,R]'", NULL},
        {"from-xla", 1, "torch_xla partition spec: '(1, None, None)', '((0, 1), None)'", NULL},
        {"to", 1, "print only this form: placements, colossal, xla or hlo", NULL},
        {"json", 0, "print exactly one JSON object (not with --to)", NULL},
        {"help", 0, "this help", NULL},
    };
    printf("usage: ldt spec --mesh M --shape S (--placements P | --from-colossal C | --from-xla X)\n"
           "                [--to placements|colossal|xla|hlo] [--json]\n\n"
           "Writes one sharding in lazydt's placements (one per mesh dim), ColossalAI/Alpa's\n"
           "sharding sequence and torch_xla's partition spec (one per tensor dim) and the HLO\n"
           "sharding string (device ids from the mesh's rank array). A tensor dim sharded on\n"
           "several mesh dims lists them in increasing order, the order lazydt splits it in.\n"
           "With --json, a form that cannot be written is null and \"errors\" says why.\n"
           "See docs/notations.md.\n\nflags:\n");
    cli_print_flags(stdout, flags, NFLAGS);
    return 0;
}

/* Bad input: name the flag and what the library expected. */
static int bad(const char *flag) {
    fprintf(stderr, "ldt spec: --%s: %s\n", flag, ldt_last_error());
    return 2;
}

static void fill(form *f, ldt_status st, char *text) {
    if (st == LDT_OK) {
        f->text = text;
        return;
    }
    free(text);
    f->text = NULL;
    snprintf(f->why, sizeof f->why, "%s", ldt_last_error());
}

static void make_forms(const ldt_spec *spec, form *forms) {
    size_t need = 0;
    char *t;
    ldt_status st;
    t = malloc(512);
    if (t) ldt_placements_format(spec->placements, spec->nplace, t, 512);
    fill(&forms[F_PLACEMENTS], t ? LDT_OK : ldt_set_error(LDT_ERR_OUT_OF_MEMORY, "out of memory"), t);
    t = malloc(512);
    st = t ? ldt_colossal_format(spec->placements, spec->nplace, spec->shape.ndim, t, 512, NULL)
           : ldt_set_error(LDT_ERR_OUT_OF_MEMORY, "out of memory");
    fill(&forms[F_COLOSSAL], st, t);
    t = malloc(512);
    st = t ? ldt_xla_format(spec->placements, spec->nplace, spec->shape.ndim, t, 512, NULL)
           : ldt_set_error(LDT_ERR_OUT_OF_MEMORY, "out of memory");
    if (st == LDT_OK) { /* the CLI's form is compact, "(1,None,None)", as its JSON contract writes it */
        char *w = t;
        for (const char *r = t; *r; r++)
            if (*r != ' ') *w++ = *r;
        *w = '\0';
    }
    fill(&forms[F_XLA], st, t);
    /* the device list grows with the mesh: ask for the length first */
    st = ldt_hlo_sharding_format(spec, NULL, 0, &need);
    t = NULL;
    if (st == LDT_OK || need > 0) {
        t = malloc(need + 1);
        st = t ? ldt_hlo_sharding_format(spec, t, need + 1, NULL)
               : ldt_set_error(LDT_ERR_OUT_OF_MEMORY, "out of memory");
    }
    fill(&forms[F_HLO], st, t);
}

static int print_json(const form *forms) {
    cJSON *root = cJSON_CreateObject(), *errors = NULL;
    char *text;
    for (int i = 0; i < F_COUNT; i++) {
        if (forms[i].text) {
            cJSON_AddStringToObject(root, k_names[i], forms[i].text);
            continue;
        }
        cJSON_AddNullToObject(root, k_names[i]);
        if (!errors) errors = cJSON_CreateObject();
        cJSON_AddStringToObject(errors, k_names[i], forms[i].why);
    }
    if (errors) cJSON_AddItemToObject(root, "errors", errors);
    text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!text) return 1;
    printf("%s\n", text);
    cJSON_free(text);
    return 0;
}

int cmd_spec(int argc, char **argv) {
    cli_flag flags[NFLAGS] = {
        {"mesh", 1, "", NULL},     {"shape", 1, "", NULL}, {"placements", 1, "", NULL},
        {"from-colossal", 1, "", NULL}, {"from-xla", 1, "", NULL}, {"to", 1, "", NULL},
        {"json", 0, "", NULL},     {"help", 0, "", NULL},
    };
    static const char *const sources[] = {"placements", "from-colossal", "from-xla"};
    const char *src = NULL, *to;
    ldt_mesh *mesh = NULL;
    ldt_shape shape;
    ldt_placement pl[LDT_MAX_DIMS];
    ldt_spec spec;
    form forms[F_COUNT];
    int npl = 0, rc = 2, want = -1;
    if (cli_parse("spec", argc, argv, flags, NFLAGS)) return 2;
    if (cli_has(flags, NFLAGS, "help")) return help();
    for (int i = 0; i < 2; i++)
        if (!flags[i].value) {
            fprintf(stderr, "ldt spec: --%s is required (see ldt spec --help)\n", flags[i].name);
            return 2;
        }
    for (int i = 0; i < 3; i++) {
        if (!cli_has(flags, NFLAGS, sources[i])) continue;
        if (src) {
            fprintf(stderr, "ldt spec: --%s and --%s both given, expected one sharding\n", src,
                    sources[i]);
            return 2;
        }
        src = sources[i];
    }
    if (!src) {
        fprintf(stderr, "ldt spec: one of --placements, --from-colossal or --from-xla is "
                        "required (see ldt spec --help)\n");
        return 2;
    }
    to = cli_get(flags, NFLAGS, "to");
    if (to) {
        for (int i = 0; i < F_COUNT; i++)
            if (strcmp(to, k_names[i]) == 0) want = i;
        if (want < 0) {
            fprintf(stderr, "ldt spec: --to is '%s', expected placements, colossal, xla or hlo\n",
                    to);
            return 2;
        }
        if (cli_has(flags, NFLAGS, "json")) {
            fprintf(stderr, "ldt spec: --to prints one form as text; leave out --json or --to\n");
            return 2;
        }
    }
    if (ldt_shape_parse(cli_get(flags, NFLAGS, "shape"), &shape) != LDT_OK) return bad("shape");
    if (ldt_mesh_parse(cli_get(flags, NFLAGS, "mesh"), LDT_DEVICE_META, &mesh) != LDT_OK)
        return bad("mesh");
    {
        const char *v = cli_get(flags, NFLAGS, src);
        ldt_status st =
            strcmp(src, "placements") == 0
                ? ldt_placements_parse(v, shape.ndim, pl, LDT_MAX_DIMS, &npl)
            : strcmp(src, "from-colossal") == 0
                ? ldt_colossal_parse(v, ldt_mesh_ndim(mesh), shape.ndim, pl, LDT_MAX_DIMS, &npl)
                : ldt_xla_parse(v, ldt_mesh_ndim(mesh), shape.ndim, pl, LDT_MAX_DIMS, &npl);
        if (st != LDT_OK || ldt_spec_init(&spec, mesh, &shape, pl, npl, LDT_F32) != LDT_OK) {
            rc = bad(src);
            goto done;
        }
    }
    memset(forms, 0, sizeof forms);
    make_forms(&spec, forms);
    if (want >= 0) {
        if (forms[want].text) {
            printf("%s\n", forms[want].text);
            rc = 0;
        } else {
            fprintf(stderr, "ldt spec: no %s form: %s\n", k_names[want], forms[want].why);
            rc = 1;
        }
    } else if (cli_has(flags, NFLAGS, "json")) {
        rc = print_json(forms);
    } else {
        char buf[512];
        ldt_spec_format(&spec, buf, sizeof buf);
        printf("%s\n", buf);
        for (int i = 0; i < F_COUNT; i++)
            printf("  %-11s %s%s%s\n", k_names[i], forms[i].text ? forms[i].text : "(none: ",
                   forms[i].text ? "" : forms[i].why, forms[i].text ? "" : ")");
        rc = 0;
    }
    for (int i = 0; i < F_COUNT; i++) free(forms[i].text);
done:
    ldt_mesh_destroy(mesh);
    return rc;
}
