// cheat: adds chunk i on the host and copies the answer into place, no GPU work queued
// lesson: 05
// exercise: 1
// place: region
// caught-by: api
// naive: the output is right; a grader that times only the stream's events sees no copies and no kernel
(void)mark;
std::vector<float> sum(count);
for (size_t j = 0; j < count; ++j) sum[j] = src_a[j] + src_b[j];
CUDA_CHECK(cudaMemcpy(h_c + w.offset(i), sum.data(), bytes, cudaMemcpyHostToHost));
CUDA_CHECK(cudaEventRecord(s.done, s.stream));
