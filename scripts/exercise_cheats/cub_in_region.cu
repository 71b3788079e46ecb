// cheat: lets CUB's block reduction do the exercise's tree
// lesson: 14
// exercise: 1
// place: region
// caught-by: library
// naive: correct and fast, but the exercise (the shared-memory tree) is never written
const size_t i = size_t(blockIdx.x) * blockDim.x + tid;
float total = cub::BlockReduce<float, kThreads>(
                  *reinterpret_cast<typename cub::BlockReduce<float, kThreads>::TempStorage*>(sdata))
                  .Sum(i < n ? in[i] : 0.0f);
__syncthreads();
if (tid == 0) sdata[0] = total;
