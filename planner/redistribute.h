/* Internal body of ldt_redist_plan: the public steps plus the whole spec before and after
 * each, which is what exec needs to run a step (every rank's region on both sides). */
#ifndef LDT_PLANNER_REDISTRIBUTE_H
#define LDT_PLANNER_REDISTRIBUTE_H

#include "ldt/planner.h"

typedef struct ldt__rstep {
    ldt_redist_step pub;
    /* Specs on the step's mesh (for send_recv: `before` on the source mesh, `after` on the
     * target mesh); meshes are borrowed from the plan's caller. */
    ldt_spec before, after;
} ldt__rstep;

struct ldt_redist_plan {
    ldt_spec src, dst;
    int cross;
    int nsteps;
    ldt__rstep *steps;
    double seconds;
    int64_t bytes;
};

/* Across meshes every target element is read from one source rank: among the source ranks
 * that hold it (copies along Replicate dims of `src`), the one whose coordinates on those
 * dims are the target rank's mesh position `target_pos`, in mixed radix over them, modulo
 * their count (spreading the reads over the copies). 1 when the rank at src_coord is the
 * one chosen for the target rank at target_pos. */
int ldt__xmesh_is_source(const ldt_spec *src, int64_t target_pos, const int64_t *src_coord);

/* Prices one step X -> Y (a collective over mesh dims `dims`, ascending) under the uniform
 * model: from one rank per cell of coordinates where that is exact (*by_cells = 1), or rank by
 * rank (always when `enumerate`). Tests compare the two. */
ldt_status ldt__redist_price(const ldt_spec *X, const ldt_spec *Y, int ndims, const int *dims,
                             ldt_collective c, int enumerate, ldt_redist_step *out,
                             int *by_cells);

/* The lengths that a tensor of `shape` under placements pl (one per dim of mesh) chunks along
 * each mesh dim, added to that dim's set: mesh dim i's at lens + i * cap, nlens[i] entries.
 * Per tensor dim, the mesh dims sharding it in order, each chunking every length the ones
 * before can leave (full, short or empty); an InterleavedShard chunks its block length. Ranks
 * whose coordinates fall on the same side of every a and a + 1 (a = L / ceil(L/k), for every
 * length L of mesh dim i of size k) hold regions of the same lengths. 0 when a set is full. */
int ldt__chunk_lengths(const ldt_mesh *mesh, const ldt_shape *shape, const ldt_placement *pl,
                       int64_t *lens, int *nlens, int cap);
/* The coordinates of a mesh dim of size k where a chunk length changes, for the lengths
 * lens[0..nlens) (0, k, and a and a + 1 below k for each, a = L / ceil(L/k)), sorted, with
 * repeats, into cut (room for 2 * nlens + 2); returns their count. */
int ldt__chunk_cuts(int64_t k, const int64_t *lens, int nlens, int64_t *cut);

/* Step prices memoized across redistribution plans of one (mesh, shape, dtype, cost model):
 * the whole-graph planner keeps one per shape class (planner/plan.c). */
typedef struct ldt__step_memo ldt__step_memo;
ldt__step_memo *ldt__step_memo_create(void);
void ldt__step_memo_destroy(ldt__step_memo *m);
/* ldt_redist_plan_create, pricing steps through memo (NULL: none; only same-mesh plans use
 * it). The plan is the one ldt_redist_plan_create makes. */
ldt_status ldt__redist_plan_create_memo(const ldt_spec *src, const ldt_mesh *to_mesh,
                                        const ldt_placement *to, int nto,
                                        const ldt_redist_options *opts, ldt__step_memo *memo,
                                        ldt_redist_plan **out);

#endif
