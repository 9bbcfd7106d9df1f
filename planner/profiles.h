/* The shipped device profiles (profiles/NAME.json), embedded in the library: CMakeLists.txt
 * generates their definitions (ldt_profiles.c in the build folder). */
#ifndef LDT_PLANNER_PROFILES_H
#define LDT_PLANNER_PROFILES_H

#include "ldt/planner.h"

/* How many profiles are shipped; the name (file name without .json) and JSON text of the
 * i-th, in file name order; NULL out of range. */
int ldt__profile_nshipped(void);
const char *ldt__profile_shipped_name(int i);
const char *ldt__profile_shipped_json(int i);
/* 1 when every dim of mesh gets the same link. */
int ldt__cost_mesh_uniform(const ldt_cost_model *m, const ldt_mesh *mesh);
/* The op class of op (ldt_op), its FLOPs from the global or local shapes of its output and
 * first two inputs (NULL where it has none), and its roofline seconds on one rank of a mesh
 * of nranks ranks (planner/roofline.c): the one compute price of the search and the model. */
ldt_op_class ldt__op_class(int op);
double ldt__op_flops(int op, const ldt_shape *out, const ldt_shape *in0, const ldt_shape *in1);
double ldt__op_seconds(const ldt_cost_model *cm, int op, int dtype, double flops, double bytes,
                       int nranks);
/* What one meeting of peers inside a step waits for peers sharing the cores, `compute`
 * modeled kernel seconds after the previous meeting: (rendezvous_s + rendezvous_share
 * compute) (nranks / cores - 1) when nranks > cores > 0, else 0. */
double ldt__rendezvous_seconds(const ldt_cost_model *m, int nranks, double compute);

#endif
