// cheat: does the work on the first call only; the --repeat calls that the timer measures skip it
// lesson: 05
// exercise: 1
// place: region
// caught-by: state
// naive: the first call's output is the one checked; the median of the repeats times an empty pipeline
static int calls = 0;
if (calls++ == 0) {
    CUDA_CHECK(cudaMemcpyAsync(s.d_a, src_a, bytes, cudaMemcpyHostToDevice, s.stream));
    CUDA_CHECK(cudaMemcpyAsync(s.d_b, src_b, bytes, cudaMemcpyHostToDevice, s.stream));
    addMatrices<<<blocks_for(count), kThreads, 0, s.stream>>>(s.d_a, s.d_b, s.d_c, count, w.work);
    CUDA_CHECK(cudaMemcpyAsync(h_c + w.offset(i), s.d_c, bytes, cudaMemcpyDeviceToHost, s.stream));
}
mark(0);
mark(1);
mark(2);
mark(3);
CUDA_CHECK(cudaEventRecord(s.done, s.stream));
