/* dist.c — see dist.h. One translation unit knows MPI; with TLM_MPI undefined it compiles to
 * the single-process identity. */
#include "dist.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

#ifdef TLM_MPI
#include <limits.h>
#include <mpi.h>
#include <omp.h>

static int initialised, world_rank, world_size = 1, rank, size = 1;

int dist_available(void) { return 1; }

void dist_solo(int on) {
    rank = on ? 0 : world_rank;
    size = on ? 1 : world_size;
}

void dist_barrier(void) {
    if (world_size > 1) MPI_Barrier(MPI_COMM_WORLD);
}

int dist_world_rank(void) { return world_rank; }
int dist_world_size(void) { return world_size; }

int dist_init(int *argc, char ***argv) {
    /* only under mpirun: a plain run never touches MPI (no singleton start-up, no daemons) */
    if (!getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMIX_RANK") && !getenv("PMI_RANK")) return 0;
    if (MPI_Init(argc, argv) != MPI_SUCCESS) return tlm_error("MPI_Init failed");
    initialised = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    rank = world_rank, size = world_size;
    /* the ranks on one machine share its cores: without an explicit OMP_NUM_THREADS each takes
     * its share instead of all of them (N ranks x all cores threads would spin against each other) */
    const char *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    if (!getenv("OMP_NUM_THREADS") && local && atoi(local) > 1) {
        int share = omp_get_num_procs() / atoi(local);
        omp_set_num_threads(share > 0 ? share : 1);
    }
    return 0;
}

void dist_finalize(void) {
    if (initialised) MPI_Finalize();
    initialised = 0;
}

int dist_rank(void) { return rank; }
int dist_size(void) { return size; }

void dist_sum_floats(float *x, size_t n) {
    if (size == 1) return;
    for (size_t done = 0; done < n;) { /* counts are ints: reduce in chunks */
        int chunk = n - done > (size_t)(INT_MAX / 2) ? INT_MAX / 2 : (int)(n - done);
        MPI_Allreduce(MPI_IN_PLACE, x + done, chunk, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        done += (size_t)chunk;
    }
}

double dist_sum_double(double v) {
    if (size > 1) MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return v;
}

int dist_max_int(int v) {
    if (size > 1) MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return v;
}

void dist_broadcast(void *buf, size_t bytes, int root) {
    if (size > 1) MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD);
}

/* counts and displacements of the shards, as ints */
static void shard_layout(const size_t *lo, int *counts, int *displs) {
    for (int r = 0; r < size; r++) counts[r] = (int)(lo[r + 1] - lo[r]), displs[r] = (int)lo[r];
}

void dist_allgather_shards(float *x, const size_t *lo) {
    if (size == 1) return;
    int *counts = malloc(sizeof(int) * size * 2), *displs = counts + size;
    shard_layout(lo, counts, displs);
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, x, counts, displs, MPI_FLOAT, MPI_COMM_WORLD);
    free(counts);
}

void dist_gather_shards(const float *mine, float *full, const size_t *lo, int root) {
    if (size == 1) {
        memcpy(full, mine, sizeof(float) * lo[1]);
        return;
    }
    int *counts = malloc(sizeof(int) * size * 2), *displs = counts + size;
    shard_layout(lo, counts, displs);
    MPI_Gatherv(mine, counts[rank], MPI_FLOAT, full, counts, displs, MPI_FLOAT, root, MPI_COMM_WORLD);
    free(counts);
}

#else /* a build without MPI: one process */

int dist_available(void) { return 0; }
int dist_init(int *argc, char ***argv) {
    (void)argc, (void)argv;
    if (getenv("OMPI_COMM_WORLD_SIZE") && atoi(getenv("OMPI_COMM_WORLD_SIZE")) > 1)
        return tlm_error("started by mpirun with %s ranks, but this tinylm was built without MPI "
                         "(install libopenmpi-dev and rebuild)",
                         getenv("OMPI_COMM_WORLD_SIZE"));
    return 0;
}
void dist_finalize(void) {}
int dist_rank(void) { return 0; }
int dist_size(void) { return 1; }
void dist_sum_floats(float *x, size_t n) { (void)x, (void)n; }
double dist_sum_double(double v) { return v; }
int dist_max_int(int v) { return v; }
void dist_broadcast(void *buf, size_t bytes, int root) { (void)buf, (void)bytes, (void)root; }
void dist_allgather_shards(float *x, const size_t *lo) { (void)x, (void)lo; }
void dist_gather_shards(const float *mine, float *full, const size_t *lo, int root) {
    (void)root;
    memcpy(full, mine, sizeof(float) * lo[1]);
}
void dist_solo(int on) { (void)on; }
void dist_barrier(void) {}
int dist_world_rank(void) { return 0; }
int dist_world_size(void) { return 1; }
#endif
