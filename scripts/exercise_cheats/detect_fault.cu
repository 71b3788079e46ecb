// cheat: adds correctly only when the fault injection is off, so the check's self-test ("the check catches a planted fault") still passes while normal runs skip work
// lesson: 00
// exercise: 1
// place: region
// caught-by: fault-injection
// naive: a grader that runs --inject-fault to prove its check works sees the fault caught either way
extern __device__ bool g_injecting;
size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
if (i < n && !g_injecting) c[i] = a[i] + b[i];
