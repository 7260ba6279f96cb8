"""A minimal boolean build setting (bazel_skylib is not available offline)."""

BoolFlagInfo = provider(fields = ["value"])

def _bool_flag_impl(ctx):
    return [BoolFlagInfo(value = ctx.build_setting_value)]

bool_flag = rule(
    implementation = _bool_flag_impl,
    build_setting = config.bool(flag = True),
)
