/* `mpirun -np N ldt train ... --backend mpi` against the threaded mesh: the same losses, bit
 * for bit (the MPI backend reduces in rank order like the threads). A plain program that
 * starts the jobs itself (it is not an MPI process). Also: a world whose size is not the
 * mesh's is refused with a message. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static int fails;

static int run(const char *cmd, char *out, size_t cap) {
    FILE *f = popen(cmd, "r");
    size_t n;
    int st;
    if (!f) return -1;
    n = fread(out, 1, cap - 1, f);
    out[n] = '\0';
    st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int losses(const char *json, double *l, int cap) {
    cJSON *j = cJSON_Parse(json), *a = j ? cJSON_GetObjectItem(j, "losses") : NULL;
    int n = 0;
    if (!cJSON_IsArray(a)) {
        cJSON_Delete(j);
        return -1;
    }
    for (cJSON *x = a->child; x && n < cap; x = x->next) l[n++] = x->valuedouble;
    cJSON_Delete(j);
    return n;
}

/* The threaded run against `mpirun -np np ldt train --backend <backend>`: equal losses, or
 * within rel (NCCL on GPUs reduces in its own order). Returns 1 when the job ran. */
static int compare_on(const char *mesh, int np, const char *extra, const char *backend, double rel) {
    static char a[1 << 16], b[1 << 16];
    char cmd[2048];
    double la[64], lb[64];
    int na, nb;
    snprintf(cmd, sizeof cmd, "%s train --mesh %s --steps 8 --sample 0 --json %s 2>&1", LDT_CLI_PATH, mesh, extra);
    if (run(cmd, a, sizeof a) != 0) {
        fprintf(stderr, "FAIL threads %s: %s\n", mesh, a);
        fails++;
        return 1;
    }
    snprintf(cmd, sizeof cmd, "%s %d %s train --mesh %s --steps 8 --sample 0 --json --backend %s %s 2>&1",
             LDT_MPIRUN, np, LDT_CLI_PATH, mesh, backend, extra);
    if (run(cmd, b, sizeof b) != 0) {
        if (strcmp(backend, "nccl") == 0 && (strstr(b, "no CUDA device") || strstr(b, "no CUDA (") ||
                                             strstr(b, "has no NCCL") || strstr(b, "has no CUDA") ||
                                             strstr(b, "wants a GPU per rank"))) {
            printf("ok %s --backend nccl: refused by name without a GPU each: %.200s\n", mesh, b);
            return 0;
        }
        fprintf(stderr, "FAIL %s %s: %s\n", backend, mesh, b);
        fails++;
        return 1;
    }
    na = losses(a, la, 64);
    nb = losses(b, lb, 64);
    if (na != 8 || nb != 8) {
        fprintf(stderr, "FAIL %s: %d and %d losses\n%s\n%s\n", mesh, na, nb, a, b);
        fails++;
        return 1;
    }
    for (int i = 0; i < 8; i++)
        if (!(fabs(la[i] - lb[i]) <= rel * fabs(la[i]))) {
            fprintf(stderr, "FAIL %s %s: step %d loss %.9g (threads) vs %.9g (%s)\n", mesh, extra, i, la[i],
                    lb[i], backend);
            fails++;
            return 1;
        }
    if (!(la[7] < la[0])) {
        fprintf(stderr, "FAIL %s: the loss does not fall (%g -> %g)\n", mesh, la[0], la[7]);
        fails++;
    }
    printf("ok %s %s %s: 8 losses equal (%.6f -> %.6f)\n", backend, mesh, extra, la[0], la[7]);
    return 1;
}

static void compare(const char *mesh, int np, const char *extra) { compare_on(mesh, np, extra, "mpi", 0); }

int main(void) {
    static char out[1 << 16];
    char cmd[2048];
    compare("dp=2,tp=2", 4, "");
    compare("tp=2", 2, "--dtype f64");
    compare("dp=2,tp=2", 4, "--zero");
    compare("dp=4", 4, "--dtype bf16");
    /* a pipeline (docs/pipeline.md): the stages' sends and receives between processes */
    /* (dropout on: each micro-batch draws its rows of the single-device masks; test_pipeline
     * checks the threads against one device) */
    compare("pp=2,dp=2", 4, "--dtype f64 --global-batch 8 --micro-batch 2 --schedule 1f1b");
    compare("pp=4", 4, "--dtype f64 --layers 4 --global-batch 8 --micro-batch 2 --schedule gpipe");
    compare("pp=2,tp=2", 4, "--dtype f64 --layers 4 --global-batch 8 --micro-batch 2 --schedule interleaved:2");
    /* a process per GPU, NCCL between them; refused by name where there is no GPU */
    compare_on("tp=2", 2, "--dtype f64", "nccl", 1e-9);
    /* 2 processes for a 4-rank mesh: refused, with both numbers */
    snprintf(cmd, sizeof cmd, "%s 2 %s train --mesh dp=2,tp=2 --steps 2 --backend mpi 2>&1", LDT_MPIRUN,
             LDT_CLI_PATH);
    if (run(cmd, out, sizeof out) == 0 || !strstr(out, "4 ranks") || !strstr(out, "2 processes")) {
        fprintf(stderr, "FAIL a 4-rank mesh on 2 processes: %s\n", out);
        fails++;
    }
    snprintf(cmd, sizeof cmd, "%s train --steps 2 --backend carrier-pigeon 2>&1", LDT_CLI_PATH);
    if (run(cmd, out, sizeof out) != 2 || !strstr(out, "expected threads, mpi or nccl")) {
        fprintf(stderr, "FAIL a bad --backend: %s\n", out);
        fails++;
    }
    /* ldt step-bench on 4 processes: rank 0 reports its rank's step as one JSON object */
    snprintf(cmd, sizeof cmd, "%s 4 %s step-bench --backend mpi --steps 2 --json 2>&1", LDT_MPIRUN, LDT_CLI_PATH);
    if (run(cmd, out, sizeof out) != 0 || !strstr(out, "\"step_seconds\"") || !strstr(out, "\"all_reduce\"")) {
        fprintf(stderr, "FAIL step-bench --backend mpi: %s\n", out);
        fails++;
    }
    printf("test_train_mpi: %d failures\n", fails);
    return fails != 0;
}
