// cheat: ends the program with exit code 0 before the output is checked
// lesson: 05
// exercise: 1
// place: region
// caught-by: exit
// naive: a grader that trusts the exit code sees 0
std::exit(0);
