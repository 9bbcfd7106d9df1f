/* Checkpoint file I/O helpers (exec/ckpt_io.h): regular files only, whole writes, fsyncs. */
#define _XOPEN_SOURCE 700 /* realpath */
#include "exec/ckpt_io.h"

#include <stdlib.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"

const char *ldt__file_kind(mode_t mode) {
    if (S_ISREG(mode)) return "a regular file";
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

ldt_status ldt__open_regular(const char *what, const char *path, int missing_is_corrupt,
                             FILE **out, struct stat *st) {
    struct stat sb;
    int fd;
    FILE *f;
    *out = NULL;
    /* stat first: opening a FIFO blocks until a writer comes, and opening a device may act */
    if (stat(path, &sb) != 0) {
        if (errno == ENOENT && missing_is_corrupt)
            LDT_FAIL(LDT_ERR_CORRUPT, "%s: %s is missing", what, path);
        LDT_FAIL(LDT_ERR_SYSTEM, "%s: cannot open %s: %s", what, path, strerror(errno));
    }
    if (!S_ISREG(sb.st_mode))
        LDT_FAIL(LDT_ERR_CORRUPT, "%s: %s is %s, not a regular file", what, path,
                 ldt__file_kind(sb.st_mode));
    /* non-blocking, in case it was swapped for a FIFO since the stat; checked again below */
    fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        if (errno == ENOENT && missing_is_corrupt)
            LDT_FAIL(LDT_ERR_CORRUPT, "%s: %s is missing", what, path);
        LDT_FAIL(LDT_ERR_SYSTEM, "%s: cannot open %s: %s", what, path, strerror(errno));
    }
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        int e = errno;
        close(fd);
        if (!S_ISREG(sb.st_mode))
            LDT_FAIL(LDT_ERR_CORRUPT, "%s: %s is %s, not a regular file", what, path,
                     ldt__file_kind(sb.st_mode));
        LDT_FAIL(LDT_ERR_SYSTEM, "%s: cannot read %s: %s", what, path, strerror(e));
    }
    f = fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        LDT_FAIL(LDT_ERR_SYSTEM, "%s: cannot read %s: %s", what, path, strerror(e));
    }
    if (st) *st = sb;
    *out = f;
    return LDT_OK;
}

int ldt__write_all(int fd, const void *buf, size_t n) {
    const char *p = buf;
    while (n > 0) {
        size_t chunk = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
        ssize_t k = write(fd, p, chunk);
        if (k < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (k == 0) {
            errno = EIO;
            return -1;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

int ldt__fsync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc, e;
    if (fd < 0) return -1;
    rc = fsync(fd);
    e = errno;
    close(fd);
    /* some file systems cannot fsync a directory: their renames are durable anyway */
    if (rc != 0 && (e == EINVAL || e == ENOTSUP)) rc = 0;
    errno = e;
    return rc;
}

char *ldt__realpath(const char *path) { return realpath(path, NULL); }
