/* Strategies of the view family (to be filled). */
#include "planner/strategy.h"

void ldt__strategies_view(ldt__op_strategy *rows) { (void)rows; }
