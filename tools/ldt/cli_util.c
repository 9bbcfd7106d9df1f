/* Flag parsing and error printing shared by the ldt subcommands. */
#include <string.h>

#include <stdlib.h>

#include "ldt/core.h"
#include "ldt/models.h"
#include "tools/ldt/cli.h"

static cli_flag *find(cli_flag *flags, int nflags, const char *name, size_t len) {
    for (int i = 0; i < nflags; i++)
        if (strlen(flags[i].name) == len && strncmp(flags[i].name, name, len) == 0)
            return &flags[i];
    return NULL;
}

int cli_parse(const char *cmd, int argc, char **argv, cli_flag *flags, int nflags) {
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *eq;
        cli_flag *f;
        size_t len;
        if (strncmp(a, "--", 2) != 0) {
            fprintf(stderr, "ldt %s: unexpected argument '%s' (see ldt %s --help)\n", cmd, a, cmd);
            return 2;
        }
        a += 2;
        eq = strchr(a, '=');
        len = eq ? (size_t)(eq - a) : strlen(a);
        f = find(flags, nflags, a, len);
        if (!f) {
            fprintf(stderr, "ldt %s: unknown flag '%s' (see ldt %s --help)\n", cmd, argv[i], cmd);
            return 2;
        }
        if (!f->takes_value) {
            if (eq) {
                fprintf(stderr, "ldt %s: --%s takes no value\n", cmd, f->name);
                return 2;
            }
            f->value = "1";
        } else if (eq) {
            f->value = eq + 1;
        } else if (i + 1 < argc) {
            f->value = argv[++i];
        } else {
            fprintf(stderr, "ldt %s: --%s needs a value\n", cmd, f->name);
            return 2;
        }
    }
    return 0;
}

const char *cli_get(const cli_flag *flags, int nflags, const char *name) {
    for (int i = 0; i < nflags; i++)
        if (strcmp(flags[i].name, name) == 0) return flags[i].value;
    return NULL;
}

int cli_has(const cli_flag *flags, int nflags, const char *name) {
    return cli_get(flags, nflags, name) != NULL;
}

void cli_print_flags(FILE *f, const cli_flag *flags, int nflags) {
    for (int i = 0; i < nflags; i++) {
        char left[64];
        snprintf(left, sizeof left, "--%s%s", flags[i].name, flags[i].takes_value ? " VALUE" : "");
        fprintf(f, "  %-22s %s\n", left, flags[i].help);
    }
}

int cli_fail(const char *cmd) {
    fprintf(stderr, "ldt %s: %s\n", cmd, ldt_last_error());
    return 1;
}

int cli_int(const char *cmd, const cli_flag *flags, int nflags, const char *name, int64_t def,
            int64_t lo, int64_t *out) {
    const char *v = cli_get(flags, nflags, name);
    char *end;
    *out = def;
    if (!v) return 0;
    *out = strtoll(v, &end, 10);
    if (*v == '\0' || *end != '\0' || *out < lo) {
        fprintf(stderr, "ldt %s: --%s is '%s', expected an integer >= %lld\n", cmd, name, v,
                (long long)lo);
        return 2;
    }
    return 0;
}

int cli_model_sizes(const char *cmd, const cli_flag *flags, int nflags, ldt_model_config *cfg) {
    const struct {
        const char *name;
        int64_t *field;
    } f[] = {{"layers", &cfg->layers}, {"hidden", &cfg->hidden}, {"heads", &cfg->heads},
             {"vocab", &cfg->vocab},   {"seq", &cfg->seq},       {"batch", &cfg->batch}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (cli_int(cmd, flags, nflags, f[i].name, *f[i].field, 1, f[i].field)) return 2;
    return 0;
}
