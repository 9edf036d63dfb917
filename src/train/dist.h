/* dist.h — data-parallel training over MPI: the few collective operations the trainer needs.
 *
 * Built with MPI (CMake finds Debian's OpenMPI: libopenmpi-dev), `mpirun -np N tinylm train ...`
 * runs N ranks of the same command line; each takes 1/N of every global batch, gradients are
 * averaged with MPI_Allreduce and every rank applies the same update. Without MPI, or when the
 * program was not started by mpirun, everything here is the single-process identity (rank 0
 * of 1) and MPI is never initialised. */
#ifndef TLM_DIST_H
#define TLM_DIST_H

#include <stddef.h>

/* Initialises MPI when the process was started by mpirun (OpenMPI's environment says so);
 * returns 0, or -1 + tlm_error. Call once, first thing. */
int dist_init(int *argc, char ***argv);
void dist_finalize(void);
int dist_rank(void);
int dist_size(void);
/* 1 when built with MPI support */
int dist_available(void);

/* x [n] <- the sum over ranks, in place (a fixed reduction order for a given N) */
void dist_sum_floats(float *x, size_t n);
double dist_sum_double(double v);
int dist_max_int(int v);
/* every rank gets root's bytes */
void dist_broadcast(void *buf, size_t bytes, int root);
/* the parameter shards after a sharded (ZeRO-1) update: rank r's floats x[lo[r], lo[r+1]) go
 * to every rank, in place; lo has size+1 entries */
void dist_allgather_shards(float *x, const size_t *lo);
/* root receives every rank's shard x_r (floats lo[r]..lo[r+1]) into full [lo[size]] */
void dist_gather_shards(const float *mine, float *full, const size_t *lo, int root);
/* solo on: every rank behaves as a single process (rank 0 of 1) until solo off — how `sweep`
 * gives each rank a training run of its own */
void dist_solo(int on);
/* waits for every rank (ignores solo) */
void dist_barrier(void);
/* this rank's number and the number of ranks, ignoring solo */
int dist_world_rank(void);
int dist_world_size(void);

#endif
