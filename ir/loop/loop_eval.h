/* loop_eval.h — reference interpreter of finalized (or not) loop IR, for
 * tests: runs kernel k on args (one pointer per param) as the runtime would,
 * task by task. */
#ifndef KN_LOOP_EVAL_H
#define KN_LOOP_EVAL_H

#include "ir/loop/loop.h"

void kn_loop_eval(const kn_kernel *k, void *const *args, int64_t batch, int64_t ntasks);

#endif
