package providertest

var errorCases = []testCase{}
