// cheat: returns from the pipeline before queuing any work, so nothing is copied or timed
// lesson: 05
// exercise: 1
// place: region
// caught-by: correctness
// naive: the fastest pipeline there is; a grader that only times it grades it A
(void)mark;
return;
