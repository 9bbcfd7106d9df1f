/* Checkpoint file I/O: opening only regular files (a FIFO never blocks a reader), whole writes,
 * fsyncs, and the save's fault-injection hook that the tests drive. */
#ifndef LDT_EXEC_CKPT_IO_H
#define LDT_EXEC_CKPT_IO_H

#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

#include "ldt/exec.h"

/* Called before each step of a save (each file's create, data write and fsync, the manifest's
 * write and fsync, its rename, the directory's fsync, each removal of an old file), numbered
 * from 0. A non-zero return fails that step as an I/O error (EIO) would; a test may also end
 * the process there. `what` names the step ("fsync rank-2.<token>.safetensors"). */
typedef int (*ldt__ckpt_hook)(void *arg, int step, const char *what);

/* ldt_ckpt_save with the hook (NULL: none). */
ldt_status ldt__ckpt_save_hooked(const char *dir, int n, const char *const *names,
                                 ldt_shards *const *tensors, ldt__ckpt_hook hook, void *arg);

/* "a FIFO", "a directory", ...: what a non-regular file is, for messages. */
const char *ldt__file_kind(mode_t mode);

/* Opens path for reading only if it is a regular file (checked before opening, so a FIFO or
 * device is never opened, and again on the descriptor). `what` prefixes messages ("ckpt").
 * A missing file is LDT_ERR_CORRUPT "<path> is missing" when missing_is_corrupt, else
 * LDT_ERR_SYSTEM; a non-regular file is LDT_ERR_CORRUPT naming what it is. *st gets its stat. */
ldt_status ldt__open_regular(const char *what, const char *path, int missing_is_corrupt,
                             FILE **out, struct stat *st);

/* write(2) until all n bytes are written; 0, or -1 with errno. */
int ldt__write_all(int fd, const void *buf, size_t n);

/* fsync of a directory, so that renames and creates in it are durable; 0 or -1 with errno. */
int ldt__fsync_dir(const char *dir);

/* The absolute path with no symlinks (malloc'd), or NULL when path does not resolve. */
char *ldt__realpath(const char *path);

#endif
