// cheat: reads its own command line and skips the work in the timed runs (--repeat above 1)
// lesson: 05
// exercise: 1
// place: region
// caught-by: io
// naive: every correctness run (--repeat=1) is right; the timed runs time nothing
char cmdline[4096] = {0};
FILE* f = fopen("/proc/self/cmdline", "rb");
size_t len = f ? fread(cmdline, 1, sizeof(cmdline) - 1, f) : 0;
if (f) fclose(f);
bool timed = false;
for (size_t j = 0; j + 9 < len; ++j)
    timed |= cmdline[j] == '-' && cmdline[j + 1] == '-' && cmdline[j + 2] == 'r' && cmdline[j + 8] == '=' &&
             cmdline[j + 9] != '1';
mark(0);
if (!timed) {
    CUDA_CHECK(cudaMemcpyAsync(s.d_a, src_a, bytes, cudaMemcpyHostToDevice, s.stream));
    CUDA_CHECK(cudaMemcpyAsync(s.d_b, src_b, bytes, cudaMemcpyHostToDevice, s.stream));
    addMatrices<<<blocks_for(count), kThreads, 0, s.stream>>>(s.d_a, s.d_b, s.d_c, count, w.work);
    CUDA_CHECK(cudaMemcpyAsync(h_c + w.offset(i), s.d_c, bytes, cudaMemcpyDeviceToHost, s.stream));
}
mark(1);
mark(2);
mark(3);
CUDA_CHECK(cudaEventRecord(s.done, s.stream));
