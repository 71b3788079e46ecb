// cheat: computes only rows 0 and M-1 of C, which every row sample of the check contains
// lesson: 06
// exercise: 1
// place: region
// caught-by: correctness
// naive: a grader that checks a fixed sample (the first and last rows) passes it, at a fraction of the work
const int row = blockIdx.y * TILE + threadIdx.y;
const int col = blockIdx.x * TILE + threadIdx.x;
if ((row == 0 || row == M - 1) && col < N) {
    float sum = 0.0f;
    for (int k = 0; k < K; ++k) sum += A[static_cast<size_t>(row) * K + k] * B[static_cast<size_t>(k) * N + col];
    C[static_cast<size_t>(row) * N + col] = sum;
}
