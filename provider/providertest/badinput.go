package providertest

var badInputCases = []testCase{}
