// cheat: queues the work on the per-thread default stream; the slot's stream, which the timeline times, only records its event
// lesson: 05
// exercise: 1
// place: region
// caught-by: api
// naive: the events around the slot's stream measure nothing; the work still finishes before the final sync
mark(0);
CUDA_CHECK(cudaMemcpyAsync(s.d_a, src_a, bytes, cudaMemcpyHostToDevice, cudaStreamPerThread));
CUDA_CHECK(cudaMemcpyAsync(s.d_b, src_b, bytes, cudaMemcpyHostToDevice, cudaStreamPerThread));
mark(1);
addMatrices<<<blocks_for(count), kThreads, 0, cudaStreamPerThread>>>(s.d_a, s.d_b, s.d_c, count, w.work);
mark(2);
CUDA_CHECK(cudaMemcpyAsync(h_c + w.offset(i), s.d_c, bytes, cudaMemcpyDeviceToHost, cudaStreamPerThread));
mark(3);
CUDA_CHECK(cudaEventRecord(s.done, s.stream));
