/* lesson15.h — the worked numbers of the "residual connections and normalization" lesson,
 * each computed by the engine's own kernels and compared with the value the text states. */
#ifndef TLM_LESSON15_H
#define TLM_LESSON15_H

typedef struct {
    char what[96];      /* what is computed */
    char computed[160]; /* the engine's numbers */
    char stated[96];    /* what the lesson text says */
    int ok;             /* computed agrees with stated within the stated precision */
} lesson_check;

/* Fills up to max checks; returns how many, or -1 on an internal error (tlm_last_error). */
int lesson15_run(lesson_check *out, int max);
/* |dL/dx| / |dL/dy| through `depth` layers whose Jacobian is gain * I (plus I when residual), by the
 * engine's matmul_backward (lesson 15, the residual and init-depth topics) */
double lesson_chain_gradient(float gain, int depth, int residual);

#endif
