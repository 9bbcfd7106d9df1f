/* Strategies of the reduce family (to be filled). */
#include "planner/strategy.h"

void ldt__strategies_reduce(ldt__op_strategy *rows) { (void)rows; }
