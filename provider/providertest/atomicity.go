package providertest

var atomicityCases = []testCase{}
