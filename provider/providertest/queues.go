package providertest

var queueCases = []testCase{}
