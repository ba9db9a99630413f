// sandbox-host code driver (javascript): placeholder
require("fs").writeSync(3, "{\"t\":\"fail\",\"msg\":\"not yet\"}\n");
