package providertest

var lockingCases = []testCase{}
