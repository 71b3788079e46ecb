// cheat: redefines the comparison the check calls, so every compare after the region "passes"
// lesson: 00
// exercise: 1
// place: region
// caught-by: preprocessor
// naive: a grader that compiles the learner's file whole compiles the check against the macro
#define compare(...) compare_always_equal()
size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
if (i < n) c[i] = a[i] + b[i];
