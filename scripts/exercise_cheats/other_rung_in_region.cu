// cheat: calls another rung's finished block reduction instead of writing the tree
// lesson: 14
// exercise: 1
// place: region
// caught-by: lesson-code
// naive: correct, and as fast as a later rung: the copy's own work is one call
const size_t i = size_t(blockIdx.x) * blockDim.x + tid;
const float total = rung7::blockReduce<float>(i < n ? in[i] : 0.0f);
if (tid == 0) sdata[0] = total;
