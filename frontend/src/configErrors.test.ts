import { describe, expect, it } from "vitest";
import { errorCount, errorsFromMessage, errorsFromValidation } from "./configErrors";
import type { ConfigInfos } from "./types";

describe("errorsFromMessage", () => {
  it("splits the Herder's invalid-config message per key", () => {
    const message =
      "Connector configuration is invalid and contains the following 3 error(s):\n" +
      'Missing required configuration "topic" which has no default value.\n' +
      "Invalid value x for configuration tasks.max: Not a number of type INT\n" +
      "Something about the whole connector\n" +
      "You can also find the above list of errors at the endpoint `/connector-plugins/{connectorType}/config/validate`";
    const errors = errorsFromMessage(message);
    expect(errors.topic).toEqual(['Missing required configuration "topic" which has no default value.']);
    expect(errors["tasks.max"]).toEqual(["Invalid value x for configuration tasks.max: Not a number of type INT"]);
    expect(errors[""]).toEqual(["Something about the whole connector"]);
    expect(errorCount(errors)).toBe(3);
  });

  it("keeps a one-line message for the whole form", () => {
    expect(errorsFromMessage("Connector config must contain 'connector.class'")).toEqual({
      "": ["Connector config must contain 'connector.class'"],
    });
  });
});

describe("errorsFromValidation", () => {
  it("takes the errors of each config value of Connect's ConfigInfos", () => {
    const def = { type: "STRING", required: true, default_value: null, importance: "HIGH", documentation: "" };
    const infos: ConfigInfos = {
      name: "FileSourceConnector",
      error_count: 1,
      groups: [],
      configs: [
        { definition: { name: "path", ...def }, value: { name: "path", value: null, recommended_values: [], errors: ["Missing required configuration \"path\""], visible: true } },
        { definition: { name: "topic", ...def }, value: { name: "topic", value: "t", recommended_values: [], errors: [], visible: true } },
      ],
    };
    expect(errorsFromValidation(infos)).toEqual({ path: ['Missing required configuration "path"'] });
  });
});
