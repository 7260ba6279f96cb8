# Sourced by the shell tests, benchmarks and tools that start mpirun on one
# machine: mpirun_flags (oversubscribe, no core binding, shared-memory
# transport, root allowed when running as root) and, since ranks busy-poll by
# default and may outnumber the cores, ranks that wait inside MPI yield.
mpirun_flags=(--oversubscribe --bind-to none --mca btl self,vader)
if [ "$(id -u)" = 0 ]; then mpirun_flags+=(--allow-run-as-root); fi
export OMPI_MCA_mpi_yield_when_idle=1
