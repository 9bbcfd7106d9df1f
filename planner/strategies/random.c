/* Strategies of the random family (to be filled). */
#include "planner/strategy.h"

void ldt__strategies_random(ldt__op_strategy *rows) { (void)rows; }
