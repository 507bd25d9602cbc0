package providertest

var sessionCases = []testCase{}
