/* lazydt: the whole public API. Include this, or the header of one layer (core.h, exec.h). */
#ifndef LDT_LDT_H
#define LDT_LDT_H

#include "ldt/core.h"
#include "ldt/export.h"
#include "ldt/exec.h"
#include "ldt/dlpack.h"
#include "ldt/trace.h"
#include "ldt/planner.h"
#include "ldt/models.h"

#endif
