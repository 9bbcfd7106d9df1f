/* Which device profile prices a plan: the precedence flag > LDT_PROFILE > the user's saved
 * profile > the shipped default for the mesh's device (docs/cost-model.md), and the user's
 * saved profile (read here, written atomically by ldt_cost_model_save_user). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "ldt/planner.h"

/* A preset name or a JSON file. */
static ldt_status load_named(const char *what, const char *v, ldt_cost_model *out) {
    ldt_status st;
    for (int i = 0; ldt_cost_model_preset_name(i); i++)
        if (strcmp(v, ldt_cost_model_preset_name(i)) == 0) return ldt_cost_model_preset(v, out);
    if (access(v, F_OK) != 0) {
        char known[160];
        size_t len = 0;
        known[0] = '\0';
        for (int i = 0; ldt_cost_model_preset_name(i); i++) {
            int w = snprintf(known + len, sizeof known - len, "%s%s", i ? ", " : "",
                             ldt_cost_model_preset_name(i));
            if (w > 0 && (size_t)w < sizeof known - len) len += (size_t)w;
        }
        LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "%s: '%s' is neither a profile name (%s) nor a "
                 "profile file", what, v, known);
    }
    st = ldt_cost_model_load(v, out);
    if (st != LDT_OK) {
        ldt__error_prefix(st, "%s", what);
        return ldt__trace(st, __FILE__, __LINE__);
    }
    return LDT_OK;
}

int ldt_cost_model_user_path(char *buf, size_t cap) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && xdg[0]) return snprintf(buf, cap, "%s/lazydt/profile.json", xdg);
    if (home && home[0]) return snprintf(buf, cap, "%s/.cache/lazydt/profile.json", home);
    if (cap) buf[0] = '\0';
    return -1;
}

ldt_status ldt_cost_model_default(const char *flag, const ldt_mesh *mesh, ldt_cost_model *out,
                                  const char **source) {
    const char *env = getenv("LDT_PROFILE");
    char path[4096];
    int n;
    if (!out) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cost profile: out must not be NULL");
    if (flag && flag[0]) {
        if (source) *source = "flag";
        return load_named("--profile", flag, out);
    }
    if (env && env[0]) {
        if (source) *source = "env";
        return load_named("LDT_PROFILE", env, out);
    }
    n = ldt_cost_model_user_path(path, sizeof path);
    if (n > 0 && (size_t)n < sizeof path && access(path, F_OK) == 0) {
        if (source) *source = "saved";
        return load_named("saved profile", path, out);
    }
    if (source) *source = "default";
    return ldt_cost_model_preset(mesh && ldt_mesh_device(mesh) != LDT_DEVICE_CPU ? "h100-80g"
                                                                                 : "cpu-threads",
                                 out);
}

/* mkdir -p of path's directory part up to (not including) its last component. */
static ldt_status make_dirs(char *path) {
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST) {
            int e = errno;
            *p = '/';
            LDT_FAIL(LDT_ERR_SYSTEM, "cost profile: cannot create the directory of '%s': %s", path,
                     strerror(e));
        }
        *p = '/';
    }
    return LDT_OK;
}

ldt_status ldt_cost_model_save_user(const ldt_cost_model *m) {
    char path[4096], tmp[4200];
    char *text = NULL;
    int n, fd = -1, len;
    ldt_status st = LDT_OK;
    tmp[0] = '\0';
    LDT_CHECK(ldt_cost_model_check(m));
    n = ldt_cost_model_user_path(path, sizeof path);
    if (n < 0) LDT_FAIL(LDT_ERR_INVALID_USAGE, "cost profile: neither XDG_CACHE_HOME nor HOME is "
                        "set: no user cache directory to save to");
    if ((size_t)n >= sizeof path) LDT_FAIL(LDT_ERR_INVALID_ARGUMENT, "cost profile: cache path too long");
    LDT_CHECK(make_dirs(path));
    len = ldt_cost_model_format(m, NULL, 0);
    if (len < 0 || !(text = malloc((size_t)len + 2)))
        LDT_FAIL(LDT_ERR_OUT_OF_MEMORY, "cost profile: out of memory");
    ldt_cost_model_format(m, text, (size_t)len + 1);
    text[len++] = '\n';
    snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path);
    if ((fd = mkstemp(tmp)) < 0)
        LDT_FAIL_GOTO(LDT_ERR_SYSTEM, "cost profile: cannot create a temporary file beside '%s': %s",
                      path, strerror(errno));
    for (int off = 0; off < len;) {
        ssize_t w = write(fd, text + off, (size_t)(len - off));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) LDT_FAIL_GOTO(LDT_ERR_SYSTEM, "cost profile: writing '%s' failed", tmp);
        off += (int)w;
    }
    if (fsync(fd) != 0) LDT_FAIL_GOTO(LDT_ERR_SYSTEM, "cost profile: fsync of '%s' failed", tmp);
    if (close(fd) != 0) {
        fd = -1;
        LDT_FAIL_GOTO(LDT_ERR_SYSTEM, "cost profile: closing '%s' failed", tmp);
    }
    fd = -1;
    if (rename(tmp, path) != 0)
        LDT_FAIL_GOTO(LDT_ERR_SYSTEM, "cost profile: renaming '%s' to '%s' failed: %s", tmp, path,
                      strerror(errno));
    tmp[0] = '\0';
fail:
    if (fd >= 0) close(fd);
    if (st != LDT_OK && tmp[0]) unlink(tmp);
    free(text);
    return st;
}
