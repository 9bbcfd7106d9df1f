/* Strategies of the index family (to be filled). */
#include "planner/strategy.h"

void ldt__strategies_index(ldt__op_strategy *rows) { (void)rows; }
