# Turns kernelfeature's skip notes ("<package dir>\t<top-level test>", one a line, from
# every test process, in any order, repeated) into test-kernel.sh's pattern file: one
# line per package dir, "<dir> ^(TestA|TestB)$", for the VM's -test.run. Run it with
# -F '\t' on the notes sorted with sort -u.
{
	if (!($1 in p)) {
		order[n++] = $1
		p[$1] = $2
	} else {
		p[$1] = p[$1] "|" $2
	}
}
END {
	for (i = 0; i < n; i++) print order[i], "^(" p[order[i]] ")$"
}
