// cheat: keeps the answer in a file and reads it back in later runs instead of computing it
// lesson: 05
// exercise: 1
// place: region
// caught-by: io
// naive: the first run computes and saves; every later run (the timed ones) only reads the file
(void)mark;
FILE* f = fopen("/tmp/lesson05_chunk.bin", "rb");
if (f) {
    size_t got = fread(h_c + w.offset(i), 1, bytes, f);
    (void)got;
    fclose(f);
}
CUDA_CHECK(cudaEventRecord(s.done, s.stream));
