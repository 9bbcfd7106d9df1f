/* Strategies of the nn family (to be filled). */
#include "planner/strategy.h"

void ldt__strategies_nn(ldt__op_strategy *rows) { (void)rows; }
