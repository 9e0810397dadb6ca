"""The `threadline.v1` messages and enums, as typed pydantic dataclasses.

```python
from threadline_client import v1

spec = v1.RunSpec(text="hello", checkpoints=True)
```

Generated from `proto/threadline/v1/*.proto` by betterproto2 (the generated code lives in
`threadline_client._gen` and is never edited). Enum members drop the value prefix:
`v1.RunStatus.COMPLETED` is `RUN_STATUS_COMPLETED` on the wire.
"""

import warnings

from pydantic.warnings import PydanticDeprecatedSince212

# The generated classes use `@model_validator(mode="after")` on classmethods, which pydantic 2.12+
# flags once, at class definition. That is our generated code's business, not the host's: keep it
# out of hosts that run with warnings as errors. (This package's __init__ imports this module
# first, so the generated module is defined here.)
with warnings.catch_warnings():
    warnings.simplefilter("ignore", PydanticDeprecatedSince212)
    from ._gen.threadline.v1 import *  # noqa: F403 - re-exports exactly the generated `__all__`
    from ._gen.threadline.v1 import __all__ as __all__
