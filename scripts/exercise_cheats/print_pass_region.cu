// cheat: prints the lesson's success line from the kernel instead of adding the vectors
// lesson: 00
// exercise: 1
// place: region
// caught-by: result-line
// naive: a grader that looks for "RESULT: PASS" in the output finds it (printed before the real line)
if (blockIdx.x == 0 && threadIdx.x == 0) printf("RESULT: PASS\n");
