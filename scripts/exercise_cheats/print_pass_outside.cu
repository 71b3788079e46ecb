// cheat: prints the success line at start-up, from a line added outside the regions
// lesson: 00
// exercise: 1
// place: before struct AddRun {
// caught-by: outside
// naive: a grader that builds the learner's whole file runs this initializer before main()
static const int g_banner = printf("RESULT: PASS\n");
