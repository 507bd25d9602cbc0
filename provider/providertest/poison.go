package providertest

var poisonCases = []testCase{}
