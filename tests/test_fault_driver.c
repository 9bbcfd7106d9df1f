/* Nothing hangs under mpirun: each case of test_fault_mpi (a rank stopped, a rank killed
 * during the first step, an error on two ranks) runs as a 3-process job under the default
 * mpirun options and under --mca orte_abort_on_non_zero_status 0, with a short
 * communication timeout. Every survivor must be gone within the timeout plus 10 s of the
 * fault (the error case: within 10 s, its timeout being far longer, so only the error's
 * notice can end it in time), having exited non-zero with a message (or been ended by
 * mpirun, which then exits non-zero and says why). The stopped process is killed afterwards,
 * so the test leaves nothing behind. A plain program: it runs mpirun itself. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NP 3

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void nap_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The file's contents (NUL-terminated, at most cap - 1 bytes); 0 when absent or empty. */
static int slurp(const char *dir, const char *name, int rank, char *buf, size_t cap) {
    char path[4096];
    FILE *f;
    size_t n;
    if (rank >= 0)
        snprintf(path, sizeof path, "%s/%s.%d", dir, name, rank);
    else
        snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!(f = fopen(path, "r"))) return 0;
    n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
    return n > 0;
}

/* A process of this job still running (not gone, not a zombie). */
static int alive(int pid) {
    char path[64], buf[512], *p;
    FILE *f;
    size_t n;
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    if (!(f = fopen(path, "r"))) return 0;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    p = strrchr(buf, ')'); /* "pid (comm) S ..." */
    return p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}

/* Kills pid if it is still one of ours (its command line names test_fault_mpi). */
static void kill_ours(int pid) {
    char path[64], buf[4096];
    FILE *f;
    size_t n;
    if (pid <= 0 || !alive(pid)) return;
    snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
    if (!(f = fopen(path, "r"))) return;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    for (size_t i = 0; i < n; i++)
        if (buf[i] == '\0') buf[i] = ' ';
    buf[n] = '\0';
    if (strstr(buf, "test_fault_mpi")) kill(pid, SIGKILL);
}

static void remove_dir(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[4096];
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    if (d) closedir(d);
    rmdir(dir);
}

typedef struct fcase {
    const char *name;
    int timeout_ms;
    double bound_s;    /* survivors gone within this of the fault */
    int survivor[NP];  /* the ranks that must end on their own (or by mpirun) */
} fcase;

/* One job: 0 when every check passed. */
static int run_case(const fcase *c, int noabort) {
    const char *opts = noabort ? "orte_abort_on_non_zero_status 0" : "default options";
    char dir[] = "/tmp/ldt-fault-XXXXXX", buf[4096], out[8192], tmo[32];
    int pid[NP] = {0}, mpirun_status = 0, mpirun_done = 0, fails = 0;
    double gone[NP], t_fault = -1, t0 = now_s(), worst = 0;
    pid_t job;
    for (int r = 0; r < NP; r++) gone[r] = -1;
    if (!mkdtemp(dir)) {
        printf("FAIL %s (%s): mkdtemp: %s\n", c->name, opts, strerror(errno));
        return 1;
    }
    snprintf(tmo, sizeof tmo, "%d", c->timeout_ms);
    fflush(stdout);
    job = fork();
    if (job == 0) {
        char path[4096];
        int fd;
        const char *argv[20];
        int a = 0;
        setpgid(0, 0);
        snprintf(path, sizeof path, "%s/out", dir);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        setenv("LDT_FAULT_DIR", dir, 1);
        setenv("LDT_COMM_TIMEOUT_MS", tmo, 1);
        unsetenv("LDT_NCCL_TIMEOUT_MS");
        argv[a++] = LDT_MPIEXEC;
        argv[a++] = "--oversubscribe";
        argv[a++] = "--allow-run-as-root";
        argv[a++] = "--mca";
        argv[a++] = "btl_vader_single_copy_mechanism";
        argv[a++] = "none";
        if (noabort) {
            argv[a++] = "--mca";
            argv[a++] = "orte_abort_on_non_zero_status";
            argv[a++] = "0";
        }
        argv[a++] = LDT_MPIEXEC_NP;
        argv[a++] = "3";
        argv[a++] = LDT_FAULT_PROG;
        argv[a++] = c->name;
        argv[a] = NULL;
        execv(LDT_MPIEXEC, (char *const *)argv);
        _exit(127);
    }
    if (job < 0) {
        printf("FAIL %s (%s): fork: %s\n", c->name, opts, strerror(errno));
        remove_dir(dir);
        return 1;
    }
    /* watch: the fault, then each survivor's end */
    for (;;) {
        double now = now_s();
        int all_gone = 1;
        if (!mpirun_done && waitpid(job, &mpirun_status, WNOHANG) == job) mpirun_done = 1;
        if (t_fault < 0 && slurp(dir, "fault", -1, buf, sizeof buf)) t_fault = atof(buf);
        for (int r = 0; r < NP; r++) {
            if (!pid[r] && slurp(dir, "pid", r, buf, sizeof buf)) pid[r] = atoi(buf);
            if (!c->survivor[r] || gone[r] >= 0) continue;
            if ((pid[r] && !alive(pid[r])) || mpirun_done) gone[r] = now;
            else all_gone = 0;
        }
        if (t_fault >= 0 && all_gone) break;
        if (mpirun_done && t_fault < 0) break;
        if ((t_fault >= 0 && now > t_fault + c->bound_s + 1) || now > t0 + 120) break;
        nap_ms(50);
    }
    /* Nothing left behind: the stopped rank (and any overstaying survivor), then mpirun.
     * Under the default options mpirun ends the job itself; told not to, it waits on after
     * a process killed by a signal, whatever the others did: it is ended here. */
    for (int r = 0; r < NP; r++) kill_ours(pid[r]);
    for (int i = 0; !mpirun_done && i < (noabort ? 40 : 200); i++) {
        if (waitpid(job, &mpirun_status, WNOHANG) == job) mpirun_done = 1;
        else nap_ms(50);
    }
    if (!mpirun_done) {
        if (!noabort) {
            printf("FAIL %s (%s): mpirun was still running 10 s after its processes were gone\n", c->name, opts);
            fails++;
        }
        kill(-job, SIGKILL);
        waitpid(job, &mpirun_status, 0);
    }
    if (!slurp(dir, "out", -1, out, sizeof out)) out[0] = '\0';
    /* the checks */
    if (t_fault < 0) {
        printf("FAIL %s (%s): the fault never happened; the job said:\n%s\n", c->name, opts, out);
        remove_dir(dir);
        return 1;
    }
    /* told not to abort on a non-zero status, mpirun may exit 0: the processes' own statuses
     * (their exit files) are checked below */
    if (!noabort && WIFEXITED(mpirun_status) && WEXITSTATUS(mpirun_status) == 0) {
        printf("FAIL %s (%s): mpirun exited 0\n", c->name, opts);
        fails++;
    }
    for (int r = 0; r < NP; r++) {
        double after;
        if (!c->survivor[r]) continue;
        after = gone[r] - t_fault;
        if (gone[r] < 0 || after > c->bound_s) {
            printf("FAIL %s (%s): rank %d was still running %.1f s after the fault (bound %.0f s)\n", c->name, opts,
                   r, (gone[r] < 0 ? now_s() : gone[r]) - t_fault, c->bound_s);
            fails++;
            continue;
        }
        if (after > worst) worst = after;
        if (slurp(dir, "exit", r, buf, sizeof buf)) { /* it ended on its own: status, time, message */
            int st = atoi(buf);
            char *msg = strchr(buf, ' ');
            msg = msg ? strchr(msg + 1, ' ') : NULL;
            if (st == 0 || !msg || strlen(msg) < 8) {
                printf("FAIL %s (%s): rank %d exited %d without an error message: %s\n", c->name, opts, r, st, buf);
                fails++;
            } else {
                printf("  %s (%s): rank %d exited %d, %.1f s after the fault:%s", c->name, opts, r, st, after, msg);
            }
        } else if (noabort) {
            printf("FAIL %s (%s): rank %d ended without saying how\n", c->name, opts, r);
            fails++;
        } else if (!out[0]) { /* ended by mpirun, which must say why */
            printf("FAIL %s (%s): rank %d was ended by mpirun, which said nothing\n", c->name, opts, r);
            fails++;
        } else {
            printf("  %s (%s): rank %d ended by mpirun %.1f s after the fault\n", c->name, opts, r, after);
        }
    }
    printf("%s %s (%s): survivors gone within %.1f s of the fault (bound %.0f s), mpirun status %d\n",
           fails ? "FAIL" : "ok", c->name, opts, worst, c->bound_s,
           WIFEXITED(mpirun_status) ? WEXITSTATUS(mpirun_status) : 128 + WTERMSIG(mpirun_status));
    if (fails) printf("the job said:\n%s\n", out);
    fflush(stdout);
    remove_dir(dir);
    return fails != 0;
}

int main(void) {
    /* timeouts short for CI; the error case's long, so that only its notice ends it in time */
    static const fcase cases[] = {
        {"stopped", 2000, 12.0, {1, 0, 1}},
        {"killed", 2000, 12.0, {1, 0, 1}},
        {"error", 30000, 10.0, {1, 1, 1}},
    };
    int fails = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int noabort = 0; noabort < 2; noabort++) fails += run_case(&cases[i], noabort);
    printf("test_fault_driver: %d of %d jobs failed\n", fails, (int)(2 * sizeof cases / sizeof cases[0]));
    return fails != 0;
}
