// clients/typescript/node_modules/@bufbuild/protobuf/dist/esm/is-message.js
function isMessage(arg, schema) {
  const isMessage2 = arg !== null && typeof arg == "object" && "$typeName" in arg && typeof arg.$typeName == "string";
  if (!isMessage2) {
    return false;
  }
  if (schema === void 0) {
    return true;
  }
  return schema.typeName === arg.$typeName;
}

// clients/typescript/node_modules/@bufbuild/protobuf/dist/esm/descriptors.js
var ScalarType;
(function(ScalarType2) {
  ScalarType2[ScalarType2["DOUBLE"] = 1] = "DOUBLE";
  ScalarType2[ScalarType2["FLOAT"] = 2] = "FLOAT";
  ScalarType2[ScalarType2["INT64"] = 3] = "INT64";
  ScalarType2[ScalarType2["UINT64"] = 4] = "UINT64";
  ScalarType2[ScalarType2["INT32"] = 5] = "INT32";
  ScalarType2[ScalarType2["FIXED64"] = 6] = "FIXED64";
  ScalarType2[ScalarType2["FIXED32"] = 7] = "FIXED32";
  ScalarType2[ScalarType2["BOOL"] = 8] = "BOOL";
  ScalarType2[ScalarType2["STRING"] = 9] = "STRING";
  ScalarType2[ScalarType2["BYTES"] = 12] = "BYTES";
  ScalarType2[ScalarType2["UINT32"] = 13] = "UINT32";
  ScalarType2[ScalarType2["SFIXED32"] = 15] = "SFIXED32";
  ScalarType2[ScalarType2["SFIXED64"] = 16] = "SFIXED64";
  ScalarType2[ScalarType2["SINT32"] = 17] = "SINT32";
  ScalarType2[ScalarType2["SINT64"] = 18] = "SINT64";
})(ScalarType || (ScalarType = {}));

// clients/typescript/node_modules/@bufbuild/protobuf/dist/esm/wire/varint.js
function varint64read() {
  let lowBits = 0;
  let highBits = 0;
  for (let shift = 0; shift < 28; shift += 7) {
    let b = this.buf[this.pos++];
    lowBits |= (b & 127) << shift;
    if ((b & 128) == 0) {
      this.assertBounds();
      return [lowBits, highBits];
    }
  }
  let middleByte = this.buf[this.pos++];
  lowBits |= (middleByte & 15) << 28;
  highBits = (middleByte & 112) >> 4;
  if ((middleByte & 128) == 0) {
    this.assertBounds();
    return [lowBits, highBits];
  }
  for (let shift = 3; shift <= 31; shift += 7) {
    let b = this.buf[this.pos++];
    highBits |= (b & 127) << shift;
    if ((b & 128) == 0) {
      this.assertBounds();
      return [lowBits, highBits];
    }
  }
  throw new Error("invalid varint");
}
function varint64write(lo, hi, bytes) {
  for (let i = 0; i < 28; i = i + 7) {
    const shift = lo >>> i;
    const hasNext = !(shift >>> 7 == 0 && hi == 0);
    const byte = (hasNext ? shift | 128 : shift) & 255;
    bytes.push(byte);
    if (!hasNext) {
      return;
    }
  }
  const splitBits = lo >>> 28 & 15 | (hi & 7) << 4;
  const hasMoreBits = !(hi >> 3 == 0);
  bytes.push((hasMoreBits ? splitBits | 128 : splitBits) & 255);
  if (!hasMoreBits) {
    return;
  }
  for (let i = 3; i < 31; i = i + 7) {
    const shift = hi >>> i;
    const hasNext = !(shift >>> 7 == 0);
    const byte = (hasNext ? shift | 128 : shift) & 255;
    bytes.push(byte);
    if (!hasNext) {
      return;
    }
  }
  bytes.push(hi >>> 31 & 1);
}
var TWO_PWR_32_DBL = 4294967296;
function int64FromString(dec) {
  const minus = dec[0] === "-";
  if (minus) {
    dec = dec.slice(1);
  }
  const base = 1e6;
  let lowBits = 0;
  let highBits = 0;
  function add1e6digit(begin, end) {
    const digit1e6 = Number(dec.slice(begin, end));
    highBits *= base;
    lowBits = lowBits * base + digit1e6;
    if (lowBits >= TWO_PWR_32_DBL) {
      highBits = highBits + (lowBits / TWO_PWR_32_DBL | 0);
      lowBits = lowBits % TWO_PWR_32_DBL;
    }
  }
  add1e6digit(-24, -18);
  add1e6digit(-18, -12);
  add1e6digit(-12, -6);
  add1e6digit(-6);
  return minus ? negate(lowBits, highBits) : newBits(lowBits, highBits);
}
function int64ToString(lo, hi) {
  let bits = newBits(lo, hi);
  const negative = bits.hi & 2147483648;
  if (negative) {
    bits = negate(bits.lo, bits.hi);
  }
  const result = uInt64ToString(bits.lo, bits.hi);
  return negative ? "-" + result : result;
}
function uInt64ToString(lo, hi) {
  ({ lo, hi } = toUnsigned(lo, hi));
  if (hi <= 2097151) {
    return String(TWO_PWR_32_DBL * hi + lo);
  }
  const low = lo & 16777215;
  const mid = (lo >>> 24 | hi << 8) & 16777215;
  const high = hi >> 16 & 65535;
  let digitA = low + mid * 6777216 + high * 6710656;
  let digitB = mid + high * 8147497;
  let digitC = high * 2;
  const base = 1e7;
  if (digitA >= base) {
    digitB += Math.floor(digitA / base);
    digitA %= base;
  }
  if (digitB >= base) {
    digitC += Math.floor(digitB / base);
    digitB %= base;
  }
  return digitC.toString() + decimalFrom1e7WithLeadingZeros(digitB) + decimalFrom1e7WithLeadingZeros(digitA);
}
function toUnsigned(lo, hi) {
  return { lo: lo >>> 0, hi: hi >>> 0 };
}
function newBits(lo, hi) {
  return { lo: lo | 0, hi: hi | 0 };
}
function negate(lowBits, highBits) {
  highBits = ~highBits;
  if (lowBits) {
    lowBits = ~lowBits + 1;
  } else {
    highBits += 1;
  }
  return newBits(lowBits, highBits);
}
var decimalFrom1e7WithLeadingZeros = (digit1e7) => {
  const partial = String(digit1e7);
  return "0000000".slice(partial.length) + partial;
};
function varint32write(value, bytes) {
  if (value >= 0) {
    while (value > 127) {
      bytes.push(value & 127 | 128);
      value = value >>> 7;
    }
    bytes.push(value);
  } else {
    for (let i = 0; i < 9; i++) {
      bytes.push(value & 127 | 128);
      value = value >> 7;
    }
    bytes.push(1);
  }
}
function varint32read() {
  let b = this.buf[this.pos++];
  let result = b & 127;
  if ((b & 128) == 0) {
    this.assertBounds();
    return result;
  }
  b = this.buf[this.pos++];
  result |= (b & 127) << 7;
  if ((b & 128) == 0) {
    this.assertBounds();
    return result;
  }
  b = this.buf[this.pos++];
  result |= (b & 127) << 14;
  if ((b & 128) == 0) {
    this.assertBounds();
    return result;
  }
  b = this.buf[this.pos++];
  result |= (b & 127) << 21;
  if ((b & 128) == 0) {
    this.assertBounds();
    return result;
  }
  b = this.buf[this.pos++];
  result |= (b & 15) << 28;
  for (let readBytes = 5; (b & 128) !== 0 && readBytes < 10; readBytes++)
    b = this.buf[this.pos++];
  if ((b & 128) != 0)
    throw new Error("invalid varint");
  this.assertBounds();
  return result >>> 0;
}

// clients/typescript/node_modules/@bufbuild/protobuf/dist/esm/proto-int64.js
var protoInt64 = /* @__PURE__ */ makeInt64Support();
function makeInt64Support() {
  const dv = new DataView(new ArrayBuffer(8));
  const ok = typeof BigInt === "function" && typeof dv.getBigInt64 === "function" && typeof dv.getBigUint64 === "function" && typeof dv.setBigInt64 === "function" && typeof dv.setBigUint64 === "function" && (!!globalThis.Deno || !!globalThis.Bun || typeof process != "object" || typeof process.env != "object" || process.env.BUF_BIGINT_DISABLE !== "1");
  if (ok) {
    const MIN = BigInt("-9223372036854775808");
    const MAX = BigInt("9223372036854775807");
    const UMIN = BigInt("0");
    const UMAX = BigInt("18446744073709551615");
    return {
      zero: BigInt(0),
      supported: true,
      parse(value) {
        const bi = typeof value == "bigint" ? value : BigInt(value);
        if (bi > MAX || bi < MIN) {
          throw new Error(`invalid int64: ${value}`);
        }
        return bi;
      },
      uParse(value) {
        const bi = typeof value == "bigint" ? value : BigInt(value);
        if (bi > UMAX || bi < UMIN) {
          throw new Error(`invalid uint64: ${value}`);
        }
        return bi;
      },
      enc(value) {
        dv.setBigInt64(0, this.parse(value), true);
        return {
          lo: dv.getInt32(0, true),
          hi: dv.getInt32(4, true)
        };
      },
      uEnc(value) {
        dv.setBigInt64(0, this.uParse(value), true);
        return {
          lo: dv.getInt32(0, true),
          hi: dv.getInt32(4, true)
        };
      },
      dec(lo, hi) {
        dv.setInt32(0, lo, true);
        dv.setInt32(4, hi, true);
        return dv.getBigInt64(0, true);
      },
      uDec(lo, hi) {
        dv.setInt32(0, lo, true);
        dv.setInt32(4, hi, true);
        return dv.getBigUint64(0, true);
      }
    };
  }
  return {
    zero: "0",
    supported: false,
    parse(value) {
      if (typeof value != "string") {
        value = value.toString();
      }
      assertInt64String(value);
      return value;
    },
    uParse(value) {
      if (typeof value != "string") {
        value = value.toString();
      }
      assertUInt64String(value);
      return value;
    },
    enc(value) {
      if (typeof value != "string") {
        value = value.toString();
      }
      assertInt64String(value);
      return int64FromString(value);
    },
    uEnc(value) {
      if (typeof value != "string") {
        value = value.toString();
      }
      assertUInt64String(value);
      return int64FromString(value);
    },
    dec(lo, hi) {
      return int64ToString(lo, hi);
    },
    uDec(lo, hi) {
      return uInt64ToString(lo, hi);
    }
  };
}
function assertInt64String(value) {
  if (!/^-?[0-9]+$/.test(value)) {
    throw new Error("invalid int64: " + value);
  }
}
function assertUInt64String(value) {
  if (!/^[0-9]+$/.test(value)) {
    throw new Error("invalid uint64: " + value);
  }
}

// clients/typescript/node_modules/@bufbuild/protobuf/dist/esm/reflect/scalar.js
function scalarZeroValue(type, longAsString) {
  switch (type) {
    case ScalarType.STRING:
      return "";
    case ScalarType.BOOL:
      return false;
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return 0;
    case ScalarType.INT64:
    case ScalarType.UINT64:
    case ScalarType.SFIXED64:
    case ScalarType.FIXED64:
    case ScalarType.SINT64:
      return longAsString ? "0" : protoInt64.zero;
    case ScalarType.BYTES:
      return new Uint8Array(0);
    default:
      return 0;
  }
}
function isScalarZeroValue(type, value) {
  switch (type) {
    case ScalarType.BOOL:
      return value === false;
    case ScalarType.STRING:
      return value === "";
    case ScalarType.BYTES:
      return value instanceof Uint8Array && !value.byteLength;
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      return Object.is(value, 0);
    default:
      return value == 0;
  }
}

// clients/typescript/node_modules/@bufbuild/protobuf/dist/esm/reflect/unsafe.js
var IMPLICIT = 2;
var unsafeLocal = /* @__PURE__ */ Symbol.for("reflect unsafe local");
function unsafeOneofCase(target, oneof) {
  const c = target[oneof.localName].case;
  if (c === void 0) {
    return c;
  }
  return oneof.fields.find((f) => f.localName === c);
}
function unsafeIsSet(target, field2) {
  const name = field2.localName;
  if (field2.oneof) {
    return target[field2.oneof.localName].case === name;
  }
  if (field2.presence != IMPLICIT) {
    return target[name] !== void 0 && Object.prototype.hasOwnProperty.call(target, name);
  }
  switch (field2.fieldKind) {
    case "list":
      return target[name].length > 0;
    case "map":
      return Object.keys(target[name]).length > 0;
    case "scalar":
      return !isScalarZeroValue(field2.scalar, target[name]);
    case "enum":
      return target[name] !== field2.enum.values[0].number;
  }
  throw new Error("message field with implicit presence");
}
function unsafeIsSetExplicit(target, localName) {
  return Object.prototype.hasOwnProperty.call(target, localName) && target[localName] !== void 0;
}
function unsafeGet(target, field2) {
  if (field2.oneof) {
    const oneof = target[field2.oneof.localName];
    if (oneof.case === field2.localName) {
      return oneof.value;
    }
    return void 0;
  }
  return target[field2.localName];
}
function unsafeSet(target, field2, value) {
  if (field2.oneof) {
    target[field2.oneof.localName] = {
      case: field2.localName,
      value
    };
  } else {
    target[field2.localName] = value;
  }
}
function unsafeClear(target, field2) {
  const name = field2.localName;
  if (field2.oneof) {
    const oneofLocalName = field2.oneof.localName;
    if (target[oneofLocalName].case === name) {
      target[oneofLocalName] = { case: void 0 };
    }
  } else if (field2.presence != IMPLICIT) {
    delete target[name];
  } else {
    switch (field2.fieldKind) {
      case "map":
        target[name] = {};
        break;
      case "list":
        target[name] = [];
        break;
      case "enum":
        target[name] = field2.enum.values[0].number;
        break;
      case "scalar":
        target[name] = scalarZeroValue(field2.scalar, field2.longAsString);
        break;
    }
  }
}

// clients/typescript/node_modules/@bufbuild/protobuf/dist/esm/reflect/guard.js
function isObject(arg) {
  return arg !== null && typeof arg == "object" && !Array.isArray(arg);
}
function isReflectList(arg, field2) {
  var _a, _b, _c, _d;
  if (isObject(arg) && unsafeLocal in arg && "add" in arg && "field" in arg && typeof arg.field == "function") {
    if (field2 !== void 0) {
      const a = field2;
      const b = arg.field();
      return a.listKind == b.listKind && a.scalar === b.scalar && ((_a = a.message) === null || _a === void 0 ? void 0 : _a.typeName) === ((_b = b.message) === null || _b === void 0 ? void 0 : _b.typeName) && ((_c = a.enum) === null || _c === void 0 ? void 0 : _c.typeName) === ((_d = b.enum) === null || _d === void 0 ? void 0 : _d.typeName);
    }
    return true;
  }
  return false;
}
function isReflectMap(arg, field2) {
  var _a, _b, _c, _d;
  if (isObject(arg) && unsafeLocal in arg && "has" in arg && "field" in arg && typeof arg.field == "function") {
    if (field2 !== void 0) {
      const a = field2, b = arg.field();
      return a.mapKey === b.mapKey && a.mapKind == b.mapKind && a.scalar === b.scalar && ((_a = a.message) === null || _a === void 0 ? void 0 : _a.typeName) === ((_b = b.message) === null || _b === void 0 ? void 0 : _b.typeName) && ((_c = a.enum) === null || _c === void 0 ? void 0 : _c.typeName) === ((_d = b.enum) === null || _d === void 0 ? void 0 : _d.typeName);
    }
    return true;
  }
  return false;
}
function isReflectMessage(arg, messageDesc2) {
  return isObject(arg) && unsafeLocal in arg && "desc" in arg && isObject(arg.desc) && arg.desc.kind === "message" && (messageDesc2 === void 0 || arg.desc.typeName == messageDesc2.typeName);
}

// clients/typescript/node_modules/@bufbuild/protobuf/dist/esm/wkt/wrappers.js
function isWrapper(arg) {
  return isWrapperTypeName(arg.$typeName);
}
function isWrapperDesc(messageDesc2) {
  const f = messageDesc2.fields[0];
  return isWrapperTypeName(messageDesc2.typeName) && f !== void 0 && f.fieldKind == "scalar" && f.name == "value" && f.number == 1;
}
function hasCustomJsonRepresentation(desc) {
  switch (desc.typeName) {
    case "google.protobuf.Any":
    case "google.protobuf.Timestamp":
    case "google.protobuf.Duration":
    case "google.protobuf.FieldMask":
    case "google.protobuf.Struct":
    case "google.protobuf.Value":
    case "google.protobuf.ListValue":
      return true;
    default:
      return isWrapperDesc(desc);
  }
}
function isWrapperTypeName(name) {
  return name.startsWith("google.protobuf.") && [
    "DoubleValue",
    "FloatValue",
    "Int64Value",
    "UInt64Value",
    "Int32Value",
    "UInt32Value",
    "BoolValue",
    "StringValue",
    "BytesValue"
  ].includes(name.substring(16));
}

// clients/typescript/node_modules/@bufbuild/protobuf/dist/esm/create.js
var EDITION_PROTO3 = 999;
var EDITION_PROTO2 = 998;
var IMPLICIT2 = 2;
function create(schema, init) {
  if (isMessage(init, schema)) {
    return init;
  }
  const message = createZeroMessage(schema);
  if (init !== void 0) {
    initMessage(schema, message, init);
  }
  return message;
}
function initMessage(messageDesc2, message, init) {
  for (const member of messageDesc2.members) {
    let value = init[member.localName];
    if (value == null) {
      continue;
    }
    let field2;
    if (member.kind == "oneof") {
      const oneofField = unsafeOneofCase(init, member);
      if (!oneofField) {
        continue;
      }
      field2 = oneofField;
      value = unsafeGet(init, oneofField);
    } else {
      field2 = member;
    }
    switch (field2.fieldKind) {
      case "message":
        value = toMessage(field2, value);
        break;
      case "scalar":
        value = initScalar(field2, value);
        break;
      case "list":
        value = initList(field2, value);
        break;
      case "map":
        value = initMap(field2, value);
        break;
    }
    unsafeSet(message, field2, value);
  }
  return message;
}
function initScalar(field2, value) {
  if (field2.scalar == ScalarType.BYTES) {
    return toU8Arr(value);
  }
  return value;
}
function initMap(field2, value) {
  if (isObject(value)) {
    if (field2.scalar == ScalarType.BYTES) {
      return convertObjectValues(value, toU8Arr);
    }
    if (field2.mapKind == "message") {
      return convertObjectValues(value, (val) => toMessage(field2, val));
    }
  }
  return value;
}
function initList(field2, value) {
  if (Array.isArray(value)) {
    if (field2.scalar == ScalarType.BYTES) {
      return value.map(toU8Arr);
    }
    if (field2.listKind == "message") {
      return value.map((item) => toMessage(field2, item));
    }
  }
  return value;
}
function toMessage(field2, value) {
  if (field2.fieldKind == "message" && !field2.oneof && isWrapperDesc(field2.message)) {
    return initScalar(field2.message.fields[0], value);
  }
  if (isObject(value)) {
    if (field2.message.typeName == "google.protobuf.Struct" && field2.parent.typeName !== "google.protobuf.Value") {
      return value;
    }
    if (!isMessage(value, field2.message)) {
      return create(field2.message, value);
    }
  }
  return value;
}
function toU8Arr(value) {
  return Array.isArray(value) ? new Uint8Array(value) : value;
}
function convertObjectValues(obj, fn) {
  const ret = {};
  for (const entry of Object.entries(obj)) {
    ret[entry[0]] = fn(entry[1]);
  }
  return ret;
}
var tokenZeroMessageField = /* @__PURE__ */ Symbol();
var messagePrototypes = /* @__PURE__ */ new WeakMap();
function createZeroMessage(desc) {
  let msg;
  if (!needsPrototypeChain(desc)) {
    msg = {
      $typeName: desc.typeName
    };
    for (const member of desc.members) {
      if (member.kind == "oneof" || member.presence == IMPLICIT2) {
        msg[member.localName] = createZeroField(member);
      }
    }
  } else {
    const cached = messagePrototypes.get(desc);
    let prototype;
    let members;
    if (cached) {
      ({ prototype, members } = cached);
    } else {
      prototype = {};
      members = /* @__PURE__ */ new Set();
      for (const member of desc.members) {
        if (member.kind == "oneof") {
          continue;
        }
        if (member.fieldKind != "scalar" && member.fieldKind != "enum") {
          continue;
        }
        if (member.presence == IMPLICIT2) {
          continue;
        }
        members.add(member);
        prototype[member.localName] = createZeroField(member);
      }
      messagePrototypes.set(desc, { prototype, members });
    }
    msg = Object.create(prototype);
    msg.$typeName = desc.typeName;
    for (const member of desc.members) {
      if (members.has(member)) {
        continue;
      }
      if (member.kind == "field") {
        if (member.fieldKind == "message") {
          continue;
        }
        if (member.fieldKind == "scalar" || member.fieldKind == "enum") {
          if (member.presence != IMPLICIT2) {
            continue;
          }
        }
      }
      msg[member.localName] = createZeroField(member);
    }
  }
  return msg;
}
function needsPrototypeChain(desc) {
  switch (desc.file.edition) {
    case EDITION_PROTO3:
      return false;
    case EDITION_PROTO2:
      return true;
    default:
      return desc.fields.some((f) => f.presence != IMPLICIT2 && f.fieldKind != "message" && !f.oneof);
  }
}
function createZeroField(field2) {
  if (field2.kind == "oneof") {
    return { case: void 0 };
  }
  if (field2.fieldKind == "list") {
    return [];
  }
  if (field2.fieldKind == "map") {
    return {};
  }
  if (field2.fieldKind == "message") {
    return tokenZeroMessageField;
  }
  const defaultValue = field2.getDefaultValue();
  if (defaultValue !== void 0) {
    return field2.fieldKind == "scalar" && field2.longAsString ? defaultValue.toString() : defaultValue;
  }
  return field2.fieldKind == "scalar" ? scalarZeroValue(field2.scalar, field2.longAsString) : field2.enum.values[0].number;
}

// clients/typescript/node_modules/@bufbuild/protobuf/dist/esm/reflect/error.js
var errorNames = [
  "FieldValueInvalidError",
  "FieldListRangeError",
  "ForeignFieldError"
];
var FieldError = class extends Error {
  constructor(fieldOrOneof, message, name = "FieldValueInvalidError") {
    super(message);
    this.name = name;
    this.field = () => fieldOrOneof;
  }
};
function isFieldError(arg) {
  return arg instanceof Error && errorNames.includes(arg.name) && "field" in arg && typeof arg.field == "function";
}

// clients/typescript/node_modules/@bufbuild/protobuf/dist/esm/wire/text-encoding.js
var symbol = /* @__PURE__ */ Symbol.for("@bufbuild/protobuf/text-encoding");
function getTextEncoding() {
  if (globalThis[symbol] == void 0) {
    const te = new globalThis.TextEncoder();
    const td = new globalThis.TextDecoder();
    let tdStrict;
    globalThis[symbol] = {
      encodeUtf8(text) {
        return te.encode(text);
      },
      decodeUtf8(bytes, strict) {
        if (strict) {
          if (tdStrict === void 0) {
            tdStrict = new globalThis.TextDecoder("utf-8", { fatal: true });
          }
          return tdStrict.decode(bytes);
        }
        return td.decode(bytes);
      },
      checkUtf8(text) {
        try {
          encodeURIComponent(text);
          return true;
        } catch (_) {
          return false;
        }
      }
    };
  }
  return globalThis[symbol];
}

// clients/typescript/node_modules/@bufbuild/protobuf/dist/esm/wire/binary-encoding.js
var WireType;
(function(WireType2) {
  WireType2[WireType2["Varint"] = 0] = "Varint";
  WireType2[WireType2["Bit64"] = 1] = "Bit64";
  WireType2[WireType2["LengthDelimited"] = 2] = "LengthDelimited";
  WireType2[WireType2["StartGroup"] = 3] = "StartGroup";
  WireType2[WireType2["EndGroup"] = 4] = "EndGroup";
  WireType2[WireType2["Bit32"] = 5] = "Bit32";
})(WireType || (WireType = {}));
var FLOAT32_MAX = 34028234663852886e22;
var FLOAT32_MIN = -34028234663852886e22;
var UINT32_MAX = 4294967295;
var INT32_MAX = 2147483647;
var INT32_MIN = -2147483648;
var BinaryWriter = class {
  constructor(encodeUtf8 = getTextEncoding().encodeUtf8) {
    this.encodeUtf8 = encodeUtf8;
    this.stack = [];
    this.chunks = [];
    this.buf = [];
  }
  /**
   * Return all bytes written and reset this writer.
   */
  finish() {
    if (this.buf.length) {
      this.chunks.push(new Uint8Array(this.buf));
      this.buf = [];
    }
    let len = 0;
    for (let i = 0; i < this.chunks.length; i++)
      len += this.chunks[i].length;
    let bytes = new Uint8Array(len);
    let offset = 0;
    for (let i = 0; i < this.chunks.length; i++) {
      bytes.set(this.chunks[i], offset);
      offset += this.chunks[i].length;
    }
    this.chunks = [];
    return bytes;
  }
  /**
   * Start a new fork for length-delimited data like a message
   * or a packed repeated field.
   *
   * Must be joined later with `join()`.
   */
  fork() {
    this.stack.push({ chunks: this.chunks, buf: this.buf });
    this.chunks = [];
    this.buf = [];
    return this;
  }
  /**
   * Join the last fork. Write its length and bytes, then
   * return to the previous state.
   */
  join() {
    let chunk = this.finish();
    let prev = this.stack.pop();
    if (!prev)
      throw new Error("invalid state, fork stack empty");
    this.chunks = prev.chunks;
    this.buf = prev.buf;
    this.uint32(chunk.byteLength);
    return this.raw(chunk);
  }
  /**
   * Writes a tag (field number and wire type).
   *
   * Equivalent to `uint32( (fieldNo << 3 | type) >>> 0 )`.
   *
   * Generated code should compute the tag ahead of time and call `uint32()`.
   */
  tag(fieldNo, type) {
    return this.uint32((fieldNo << 3 | type) >>> 0);
  }
  /**
   * Write a chunk of raw bytes.
   */
  raw(chunk) {
    if (this.buf.length) {
      this.chunks.push(new Uint8Array(this.buf));
      this.buf = [];
    }
    this.chunks.push(chunk);
    return this;
  }
  /**
   * Write a `uint32` value, an unsigned 32 bit varint.
   */
  uint32(value) {
    assertUInt32(value);
    while (value > 127) {
      this.buf.push(value & 127 | 128);
      value = value >>> 7;
    }
    this.buf.push(value);
    return this;
  }
  /**
   * Write a `int32` value, a signed 32 bit varint.
   */
  int32(value) {
    assertInt32(value);
    varint32write(value, this.buf);
    return this;
  }
  /**
   * Write a `bool` value, a varint.
   */
  bool(value) {
    this.buf.push(value ? 1 : 0);
    return this;
  }
  /**
   * Write a `bytes` value, length-delimited arbitrary data.
   */
  bytes(value) {
    this.uint32(value.byteLength);
    return this.raw(value);
  }
  /**
   * Write a `string` value, length-delimited data converted to UTF-8 text.
   */
  string(value) {
    let chunk = this.encodeUtf8(value);
    this.uint32(chunk.byteLength);
    return this.raw(chunk);
  }
  /**
   * Write a `float` value, 32-bit floating point number.
   */
  float(value) {
    assertFloat32(value);
    let chunk = new Uint8Array(4);
    new DataView(chunk.buffer).setFloat32(0, value, true);
    return this.raw(chunk);
  }
  /**
   * Write a `double` value, a 64-bit floating point number.
   */
  double(value) {
    let chunk = new Uint8Array(8);
    new DataView(chunk.buffer).setFloat64(0, value, true);
    return this.raw(chunk);
  }
  /**
   * Write a `fixed32` value, an unsigned, fixed-length 32-bit integer.
   */
  fixed32(value) {
    assertUInt32(value);
    let chunk = new Uint8Array(4);
    new DataView(chunk.buffer).setUint32(0, value, true);
    return this.raw(chunk);
  }
  /**
   * Write a `sfixed32` value, a signed, fixed-length 32-bit integer.
   */
  sfixed32(value) {
    assertInt32(value);
    let chunk = new Uint8Array(4);
    new DataView(chunk.buffer).setInt32(0, value, true);
    return this.raw(chunk);
  }
  /**
   * Write a `sint32` value, a signed, zigzag-encoded 32-bit varint.
   */
  sint32(value) {
    assertInt32(value);
    value = (value << 1 ^ value >> 31) >>> 0;
    varint32write(value, this.buf);
    return this;
  }
  /**
   * Write a `sfixed64` value, a signed, fixed-length 64-bit integer.
   */
  sfixed64(value) {
    let chunk = new Uint8Array(8), view = new DataView(chunk.buffer), tc = protoInt64.enc(value);
    view.setInt32(0, tc.lo, true);
    view.setInt32(4, tc.hi, true);
    return this.raw(chunk);
  }
  /**
   * Write a `fixed64` value, an unsigned, fixed-length 64 bit integer.
   */
  fixed64(value) {
    let chunk = new Uint8Array(8), view = new DataView(chunk.buffer), tc = protoInt64.uEnc(value);
    view.setInt32(0, tc.lo, true);
    view.setInt32(4, tc.hi, true);
    return this.raw(chunk);
  }
  /**
   * Write a `int64` value, a signed 64-bit varint.
   */
  int64(value) {
    let tc = protoInt64.enc(value);
    varint64write(tc.lo, tc.hi, this.buf);
    return this;
  }
  /**
   * Write a `sint64` value, a signed, zig-zag-encoded 64-bit varint.
   */
  sint64(value) {
    const tc = protoInt64.enc(value), sign = tc.hi >> 31, lo = tc.lo << 1 ^ sign, hi = (tc.hi << 1 | tc.lo >>> 31) ^ sign;
    varint64write(lo, hi, this.buf);
    return this;
  }
  /**
   * Write a `uint64` value, an unsigned 64-bit varint.
   */
  uint64(value) {
    const tc = protoInt64.uEnc(value);
    varint64write(tc.lo, tc.hi, this.buf);
    return this;
  }
};
var BinaryReader = class {
  constructor(buf, decodeUtf8 = getTextEncoding().decodeUtf8) {
    this.decodeUtf8 = decodeUtf8;
    this.varint64 = varint64read;
    this.uint32 = varint32read;
    this.buf = buf;
    this.len = buf.length;
    this.pos = 0;
    this.view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  }
  /**
   * Reads a tag - field number and wire type. Tags are uint32 varints; values
   * that do not fit in uint32 are rejected.
   */
  tag() {
    const start2 = this.pos;
    const tag2 = this.uint32();
    const bytesRead = this.pos - start2;
    if (bytesRead > 5 || bytesRead == 5 && this.buf[this.pos - 1] > 15) {
      throw new Error("illegal tag: varint overflows uint32");
    }
    const fieldNo = tag2 >>> 3;
    const wireType = tag2 & 7;
    if (fieldNo <= 0 || wireType > 5) {
      throw new Error("illegal tag: field no " + fieldNo + " wire type " + wireType);
    }
    return [fieldNo, wireType];
  }
  /**
   * Skip one element and return the skipped data.
   *
   * When skipping StartGroup, provide the tags field number to check for
   * matching field number in the EndGroup tag. Recursion into nested groups
   * is guarded by the `recursionLimit` argument: When the limit is reached,
   * this method throws.
   */
  skip(wireType, fieldNo, recursionLimit = 100) {
    let start2 = this.pos;
    switch (wireType) {
      case WireType.Varint:
        while (this.buf[this.pos++] & 128) {
        }
        break;
      // @ts-ignore TS7029: Fallthrough case in switch -- ignore instead of expect-error for compiler settings without noFallthroughCasesInSwitch: true
      case WireType.Bit64:
        this.pos += 4;
      case WireType.Bit32:
        this.pos += 4;
        break;
      case WireType.LengthDelimited:
        let len = this.uint32();
        this.pos += len;
        break;
      case WireType.StartGroup:
        if (recursionLimit <= 0) {
          throw new Error("maximum recursion depth reached");
        }
        for (; ; ) {
          const [fn, wt] = this.tag();
          if (wt === WireType.EndGroup) {
            if (fieldNo !== void 0 && fn !== fieldNo) {
              throw new Error("invalid end group tag");
            }
            break;
          }
          this.skip(wt, fn, recursionLimit - 1);
        }
        break;
      default:
        throw new Error("cant skip wire type " + wireType);
    }
    this.assertBounds();
    return this.buf.subarray(start2, this.pos);
  }
  /**
   * Throws error if position in byte array is out of range.
   */
  assertBounds() {
    if (this.pos > this.len)
      throw new RangeError("premature EOF");
  }
  /**
   * Read a `int32` field, a signed 32 bit varint.
   */
  int32() {
    return this.uint32() | 0;
  }
  /**
   * Read a `sint32` field, a signed, zigzag-encoded 32-bit varint.
   */
  sint32() {
    let zze = this.uint32();
    return zze >>> 1 ^ -(zze & 1);
  }
  /**
   * Read a `int64` field, a signed 64-bit varint.
   */
  int64() {
    return protoInt64.dec(...this.varint64());
  }
  /**
   * Read a `uint64` field, an unsigned 64-bit varint.
   */
  uint64() {
    return protoInt64.uDec(...this.varint64());
  }
  /**
   * Read a `sint64` field, a signed, zig-zag-encoded 64-bit varint.
   */
  sint64() {
    let [lo, hi] = this.varint64();
    let s = -(lo & 1);
    lo = (lo >>> 1 | (hi & 1) << 31) ^ s;
    hi = hi >>> 1 ^ s;
    return protoInt64.dec(lo, hi);
  }
  /**
   * Read a `bool` field, a variant.
   */
  bool() {
    let [lo, hi] = this.varint64();
    return lo !== 0 || hi !== 0;
  }
  /**
   * Read a `fixed32` field, an unsigned, fixed-length 32-bit integer.
   */
  fixed32() {
    return this.view.getUint32((this.pos += 4) - 4, true);
  }
  /**
   * Read a `sfixed32` field, a signed, fixed-length 32-bit integer.
   */
  sfixed32() {
    return this.view.getInt32((this.pos += 4) - 4, true);
  }
  /**
   * Read a `fixed64` field, an unsigned, fixed-length 64 bit integer.
   */
  fixed64() {
    return protoInt64.uDec(this.sfixed32(), this.sfixed32());
  }
  /**
   * Read a `fixed64` field, a signed, fixed-length 64-bit integer.
   */
  sfixed64() {
    return protoInt64.dec(this.sfixed32(), this.sfixed32());
  }
  /**
   * Read a `float` field, 32-bit floating point number.
   */
  float() {
    return this.view.getFloat32((this.pos += 4) - 4, true);
  }
  /**
   * Read a `double` field, a 64-bit floating point number.
   */
  double() {
    return this.view.getFloat64((this.pos += 8) - 8, true);
  }
  /**
   * Read a `bytes` field, length-delimited arbitrary data.
   */
  bytes() {
    let len = this.uint32(), start2 = this.pos;
    this.pos += len;
    this.assertBounds();
    return this.buf.subarray(start2, start2 + len);
  }
  /**
   * Read a `string` field, length-delimited data converted to UTF-8 text. If
   * `strict` is true, throw on invalid UTF-8 instead of substituting U+FFFD.
   */
  string(strict) {
    return this.decodeUtf8(this.bytes(), strict);
  }
};
function assertInt32(arg) {
  if (typeof arg == "string") {
    arg = Number(arg);
  } else if (typeof arg != "number") {
    throw new Error("invalid int32: " + typeof arg);
  }
  if (!Number.isInteger(arg) || arg > INT32_MAX || arg < INT32_MIN)
    throw new Error("invalid int32: " + arg);
}
function assertUInt32(arg) {
  if (typeof arg == "string") {
    arg = Number(arg);
  } else if (typeof arg != "number") {
    throw new Error("invalid uint32: " + typeof arg);
  }
  if (!Number.isInteger(arg) || arg > UINT32_MAX || arg < 0)
    throw new Error("invalid uint32: " + arg);
}
function assertFloat32(arg) {
  if (typeof arg == "string") {
    const o = arg;
    arg = Number(arg);
    if (Number.isNaN(arg) && o !== "NaN") {
      throw new Error("invalid float32: " + o);
    }
  } else if (typeof arg != "number") {
    throw new Error("invalid float32: " + typeof arg);
  }
  if (Number.isFinite(arg) && (arg > FLOAT32_MAX || arg < FLOAT32_MIN))
    throw new Error("invalid float32: " + arg);
}

// clients/typescript/node_modules/@bufbuild/protobuf/dist/esm/reflect/reflect-check.js
function checkField(field2, value) {
  const check = field2.fieldKind == "list" ? isReflectList(value, field2) : field2.fieldKind == "map" ? isReflectMap(value, field2) : checkSingular(field2, value);
  if (check === true) {
    return void 0;
  }
  let reason;
  switch (field2.fieldKind) {
    case "list":
      reason = `expected ${formatReflectList(field2)}, got ${formatVal(value)}`;
      break;
    case "map":
      reason = `expected ${formatReflectMap(field2)}, got ${formatVal(value)}`;
      break;
    default: {
      reason = reasonSingular(field2, value, check);
    }
  }
  return new FieldError(field2, reason);
}
function checkListItem(field2, index, value) {
  const check = checkSingular(field2, value);
  if (check !== true) {
    return new FieldError(field2, `list item #${index + 1}: ${reasonSingular(field2, value, check)}`);
  }
  return void 0;
}
function checkMapEntry(field2, key, value) {
  const checkKey = checkScalarValue(key, field2.mapKey);
  if (checkKey !== true) {
    return new FieldError(field2, `invalid map key: ${reasonSingular({ scalar: field2.mapKey }, key, checkKey)}`);
  }
  const checkVal = checkSingular(field2, value);
  if (checkVal !== true) {
    return new FieldError(field2, `map entry ${formatVal(key)}: ${reasonSingular(field2, value, checkVal)}`);
  }
  return void 0;
}
function checkSingular(field2, value) {
  if (field2.scalar !== void 0) {
    return checkScalarValue(value, field2.scalar);
  }
  if (field2.enum !== void 0) {
    if (field2.enum.open) {
      return checkScalarValue(value, ScalarType.INT32);
    }
    return field2.enum.values.some((v) => v.number === value);
  }
  return isReflectMessage(value, field2.message);
}
function checkScalarValue(value, scalar) {
  switch (scalar) {
    case ScalarType.DOUBLE:
      return typeof value == "number";
    case ScalarType.FLOAT:
      if (typeof value != "number") {
        return false;
      }
      if (Number.isNaN(value) || !Number.isFinite(value)) {
        return true;
      }
      if (value > FLOAT32_MAX || value < FLOAT32_MIN) {
        return `${value.toFixed()} out of range`;
      }
      return true;
    case ScalarType.INT32:
    case ScalarType.SFIXED32:
    case ScalarType.SINT32:
      if (typeof value !== "number" || !Number.isInteger(value)) {
        return false;
      }
      if (value > INT32_MAX || value < INT32_MIN) {
        return `${value.toFixed()} out of range`;
      }
      return true;
    case ScalarType.FIXED32:
    case ScalarType.UINT32:
      if (typeof value !== "number" || !Number.isInteger(value)) {
        return false;
      }
      if (value > UINT32_MAX || value < 0) {
        return `${value.toFixed()} out of range`;
      }
      return true;
    case ScalarType.BOOL:
      return typeof value == "boolean";
    case ScalarType.STRING:
      if (typeof value != "string") {
        return false;
      }
      return getTextEncoding().checkUtf8(value) || "invalid UTF8";
    case ScalarType.BYTES:
      return value instanceof Uint8Array;
    case ScalarType.INT64:
    case ScalarType.SFIXED64:
    case ScalarType.SINT64:
      if (typeof value == "bigint" || typeof value == "number" || typeof value == "string" && value.length > 0) {
        try {
          protoInt64.parse(value);
          return true;
        } catch (_) {
          return `${value} out of range`;
        }
      }
      return false;
    case ScalarType.FIXED64:
    case ScalarType.UINT64:
      if (typeof value == "bigint" || typeof value == "number" || typeof value == "string" && value.length > 0) {
        try {
          protoInt64.uParse(value);
          return true;
        } catch (_) {
          return `${value} out of range`;
        }
      }
      return false;
  }
}
function reasonSingular(field2, val, details) {
  details = typeof details == "string" ? `: ${details}` : `, got ${formatVal(val)}`;
  if (field2.scalar !== void 0) {
    return `expected ${scalarTypeDescription(field2.scalar)}` + details;
  }
  if (field2.enum !== void 0) {
    return `expected ${field2.enum.toString()}` + details;
  }
  return `expected ${formatReflectMessage(field2.message)}` + details;
}
function formatVal(val) {
  switch (typeof val) {
    case "object":
      if (val === null) {
        return "null";
      }
      if (val instanceof Uint8Array) {
        return `Uint8Array(${val.length})`;
      }
      if (Array.isArray(val)) {
        return `Array(${val.length})`;
      }
      if (isReflectList(val)) {
        return formatReflectList(val.field());
      }
      if (isReflectMap(val)) {
        return formatReflectMap(val.field());
      }
      if (isReflectMessage(val)) {
        return formatReflectMessage(val.desc);
      }
      if (isMessage(val)) {
        return `message ${val.$typeName}`;
      }
      return "object";
    case "string":
      return val.length > 30 ? "string" : `"${val.split('"').join('\\"')}"`;
    case "boolean":
      return String(val);
    case "number":
      return String(val);
    case "bigint":
      return String(val) + "n";
    default:
      return typeof val;
  }
}
function formatReflectMessage(desc) {
  return `ReflectMessage (${desc.typeName})`;
}
function formatReflectList(field2) {
  switch (field2.listKind) {
    case "message":
      return `ReflectList (${field2.message.toString()})`;
    case "enum":
      return `ReflectList (${field2.enum.toString()})`;
    case "scalar":
      return `ReflectList (${ScalarType[field2.scalar]})`;
  }
}
function formatReflectMap(field2) {
  switch (field2.mapKind) {
    case "message":
      return `ReflectMap (${ScalarType[field2.mapKey]}, ${field2.message.toString()})`;
    case "enum":
      return `ReflectMap (${ScalarType[field2.mapKey]}, ${field2.enum.toString()})`;
    case "scalar":
      return `ReflectMap (${ScalarType[field2.mapKey]}, ${ScalarType[field2.scalar]})`;
  }
}
function scalarTypeDescription(scalar) {
  switch (scalar) {
    case ScalarType.STRING:
      return "string";
    case ScalarType.BOOL:
      return "boolean";
    case ScalarType.INT64:
    case ScalarType.SINT64:
    case ScalarType.SFIXED64:
      return "bigint (int64)";
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return "bigint (uint64)";
    case ScalarType.BYTES:
      return "Uint8Array";
    case ScalarType.DOUBLE:
      return "number (float64)";
    case ScalarType.FLOAT:
      return "number (float32)";
    case ScalarType.FIXED32:
    case ScalarType.UINT32:
      return "number (uint32)";
    case ScalarType.INT32:
    case ScalarType.SFIXED32:
    case ScalarType.SINT32:
      return "number (int32)";
  }
}

// clients/typescript/node_modules/@bufbuild/protobuf/dist/esm/reflect/reflect.js
var NULL_VALUE = 0;
function reflect(messageDesc2, message, check = true) {
  return new ReflectMessageImpl(messageDesc2, message, check);
}
var messageSortedFields = /* @__PURE__ */ new WeakMap();
var ReflectMessageImpl = class {
  get sortedFields() {
    const cached = messageSortedFields.get(this.desc);
    if (cached) {
      return cached;
    }
    const sortedFields = this.desc.fields.concat().sort((a, b) => a.number - b.number);
    messageSortedFields.set(this.desc, sortedFields);
    return sortedFields;
  }
  constructor(messageDesc2, message, check = true) {
    this.lists = /* @__PURE__ */ new Map();
    this.maps = /* @__PURE__ */ new Map();
    this.check = check;
    this.desc = messageDesc2;
    this.message = this[unsafeLocal] = message !== null && message !== void 0 ? message : create(messageDesc2);
    this.fields = messageDesc2.fields;
    this.oneofs = messageDesc2.oneofs;
    this.members = messageDesc2.members;
  }
  findNumber(number) {
    if (!this._fieldsByNumber) {
      this._fieldsByNumber = new Map(this.desc.fields.map((f) => [f.number, f]));
    }
    return this._fieldsByNumber.get(number);
  }
  oneofCase(oneof) {
    assertOwn(this.message, oneof);
    return unsafeOneofCase(this.message, oneof);
  }
  isSet(field2) {
    assertOwn(this.message, field2);
    return unsafeIsSet(this.message, field2);
  }
  clear(field2) {
    assertOwn(this.message, field2);
    unsafeClear(this.message, field2);
  }
  get(field2) {
    assertOwn(this.message, field2);
    const value = unsafeGet(this.message, field2);
    switch (field2.fieldKind) {
      case "list":
        let list = this.lists.get(field2);
        if (!list || list[unsafeLocal] !== value) {
          this.lists.set(
            field2,
            // biome-ignore lint/suspicious/noAssignInExpressions: no
            list = new ReflectListImpl(field2, value, this.check)
          );
        }
        return list;
      case "map":
        let map = this.maps.get(field2);
        if (!map || map[unsafeLocal] !== value) {
          this.maps.set(
            field2,
            // biome-ignore lint/suspicious/noAssignInExpressions: no
            map = new ReflectMapImpl(field2, value, this.check)
          );
        }
        return map;
      case "message":
        return messageToReflect(field2, value, this.check);
      case "scalar":
        return value === void 0 ? scalarZeroValue(field2.scalar, false) : longToReflect(field2, value);
      case "enum":
        return value !== null && value !== void 0 ? value : field2.enum.values[0].number;
    }
  }
  set(field2, value) {
    assertOwn(this.message, field2);
    if (this.check) {
      const err = checkField(field2, value);
      if (err) {
        throw err;
      }
    }
    let local;
    if (field2.fieldKind == "message") {
      local = messageToLocal(field2, value);
    } else if (isReflectMap(value) || isReflectList(value)) {
      local = value[unsafeLocal];
    } else {
      local = longToLocal(field2, value);
    }
    unsafeSet(this.message, field2, local);
  }
  getUnknown() {
    return this.message.$unknown;
  }
  setUnknown(value) {
    this.message.$unknown = value;
  }
};
function assertOwn(owner, member) {
  if (member.parent.typeName !== owner.$typeName) {
    throw new FieldError(member, `cannot use ${member.toString()} with message ${owner.$typeName}`, "ForeignFieldError");
  }
}
var ReflectListImpl = class {
  field() {
    return this._field;
  }
  get size() {
    return this._arr.length;
  }
  constructor(field2, unsafeInput, check) {
    this._field = field2;
    this._arr = this[unsafeLocal] = unsafeInput;
    this.check = check;
  }
  get(index) {
    const item = this._arr[index];
    return item === void 0 ? void 0 : listItemToReflect(this._field, item, this.check);
  }
  set(index, item) {
    if (index < 0 || index >= this._arr.length) {
      throw new FieldError(this._field, `list item #${index + 1}: out of range`);
    }
    if (this.check) {
      const err = checkListItem(this._field, index, item);
      if (err) {
        throw err;
      }
    }
    this._arr[index] = listItemToLocal(this._field, item);
  }
  add(item) {
    if (this.check) {
      const err = checkListItem(this._field, this._arr.length, item);
      if (err) {
        throw err;
      }
    }
    this._arr.push(listItemToLocal(this._field, item));
    return void 0;
  }
  clear() {
    this._arr.splice(0, this._arr.length);
  }
  [Symbol.iterator]() {
    return this.values();
  }
  keys() {
    return this._arr.keys();
  }
  *values() {
    for (const item of this._arr) {
      yield listItemToReflect(this._field, item, this.check);
    }
  }
  *entries() {
    for (let i = 0; i < this._arr.length; i++) {
      yield [i, listItemToReflect(this._field, this._arr[i], this.check)];
    }
  }
};
var ReflectMapImpl = class {
  constructor(field2, unsafeInput, check = true) {
    this.obj = this[unsafeLocal] = unsafeInput !== null && unsafeInput !== void 0 ? unsafeInput : {};
    this.check = check;
    this._field = field2;
  }
  field() {
    return this._field;
  }
  set(key, value) {
    if (this.check) {
      const err = checkMapEntry(this._field, key, value);
      if (err) {
        throw err;
      }
    }
    this.obj[mapKeyToLocal(key)] = mapValueToLocal(this._field, value);
    return this;
  }
  delete(key) {
    const k = mapKeyToLocal(key);
    const has = Object.prototype.hasOwnProperty.call(this.obj, k);
    if (has) {
      delete this.obj[k];
    }
    return has;
  }
  clear() {
    for (const key of Object.keys(this.obj)) {
      delete this.obj[key];
    }
  }
  get(key) {
    let val = this.obj[mapKeyToLocal(key)];
    if (val !== void 0) {
      val = mapValueToReflect(this._field, val, this.check);
    }
    return val;
  }
  has(key) {
    return Object.prototype.hasOwnProperty.call(this.obj, mapKeyToLocal(key));
  }
  *keys() {
    for (const objKey of Object.keys(this.obj)) {
      yield mapKeyToReflect(objKey, this._field.mapKey);
    }
  }
  *entries() {
    for (const objEntry of Object.entries(this.obj)) {
      yield [
        mapKeyToReflect(objEntry[0], this._field.mapKey),
        mapValueToReflect(this._field, objEntry[1], this.check)
      ];
    }
  }
  [Symbol.iterator]() {
    return this.entries();
  }
  get size() {
    return Object.keys(this.obj).length;
  }
  *values() {
    for (const val of Object.values(this.obj)) {
      yield mapValueToReflect(this._field, val, this.check);
    }
  }
  forEach(callbackfn, thisArg) {
    for (const mapEntry of this.entries()) {
      callbackfn.call(thisArg, mapEntry[1], mapEntry[0], this);
    }
  }
};
function messageToLocal(field2, value) {
  if (!isReflectMessage(value)) {
    return value;
  }
  if (isWrapper(value.message) && !field2.oneof && field2.fieldKind == "message") {
    return value.message.value;
  }
  if (value.desc.typeName == "google.protobuf.Struct" && field2.parent.typeName != "google.protobuf.Value") {
    return wktStructToLocal(value.message);
  }
  return value.message;
}
function messageToReflect(field2, value, check) {
  if (value !== void 0) {
    if (isWrapperDesc(field2.message) && !field2.oneof && field2.fieldKind == "message") {
      value = {
        $typeName: field2.message.typeName,
        value: longToReflect(field2.message.fields[0], value)
      };
    } else if (field2.message.typeName == "google.protobuf.Struct" && field2.parent.typeName != "google.protobuf.Value" && isObject(value)) {
      value = wktStructToReflect(value);
    }
  }
  return new ReflectMessageImpl(field2.message, value, check);
}
function listItemToLocal(field2, value) {
  if (field2.listKind == "message") {
    return messageToLocal(field2, value);
  }
  return longToLocal(field2, value);
}
function listItemToReflect(field2, value, check) {
  if (field2.listKind == "message") {
    return messageToReflect(field2, value, check);
  }
  return longToReflect(field2, value);
}
function mapValueToLocal(field2, value) {
  if (field2.mapKind == "message") {
    return messageToLocal(field2, value);
  }
  return longToLocal(field2, value);
}
function mapValueToReflect(field2, value, check) {
  if (field2.mapKind == "message") {
    return messageToReflect(field2, value, check);
  }
  return value;
}
function mapKeyToLocal(key) {
  return typeof key == "string" || typeof key == "number" ? key : String(key);
}
function mapKeyToReflect(key, type) {
  switch (type) {
    case ScalarType.STRING:
      return key;
    case ScalarType.INT32:
    case ScalarType.FIXED32:
    case ScalarType.UINT32:
    case ScalarType.SFIXED32:
    case ScalarType.SINT32: {
      const n = Number.parseInt(key);
      if (Number.isFinite(n)) {
        return n;
      }
      break;
    }
    case ScalarType.BOOL:
      switch (key) {
        case "true":
          return true;
        case "false":
          return false;
      }
      break;
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      try {
        return protoInt64.uParse(key);
      } catch (_a) {
      }
      break;
    default:
      try {
        return protoInt64.parse(key);
      } catch (_b) {
      }
      break;
  }
  return key;
}
function longToReflect(field2, value) {
  switch (field2.scalar) {
    case ScalarType.INT64:
    case ScalarType.SFIXED64:
    case ScalarType.SINT64:
      if ("longAsString" in field2 && field2.longAsString && typeof value == "string") {
        value = protoInt64.parse(value);
      }
      break;
    case ScalarType.FIXED64:
    case ScalarType.UINT64:
      if ("longAsString" in field2 && field2.longAsString && typeof value == "string") {
        value = protoInt64.uParse(value);
      }
      break;
  }
  return value;
}
function longToLocal(field2, value) {
  switch (field2.scalar) {
    case ScalarType.INT64:
    case ScalarType.SFIXED64:
    case ScalarType.SINT64:
      if ("longAsString" in field2 && field2.longAsString) {
        value = String(value);
      } else if (typeof value == "string" || typeof value == "number") {
        value = protoInt64.parse(value);
      }
      break;
    case ScalarType.FIXED64:
    case ScalarType.UINT64:
      if ("longAsString" in field2 && field2.longAsString) {
        value = String(value);
      } else if (typeof value == "string" || typeof value == "number") {
        value = protoInt64.uParse(value);
      }
      break;
  }
  return value;
}
function wktStructToReflect(json) {
  const struct = {
    $typeName: "google.protobuf.Struct",
    fields: {}
  };
  if (isObject(json)) {
    for (const [k, v] of Object.entries(json)) {
      struct.fields[k] = wktValueToReflect(v);
    }
  }
  return struct;
}
function wktStructToLocal(val) {
  const json = {};
  for (const [k, v] of Object.entries(val.fields)) {
    json[k] = wktValueToLocal(v);
  }
  return json;
}
function wktValueToLocal(val) {
  switch (val.kind.case) {
    case "structValue":
      return wktStructToLocal(val.kind.value);
    case "listValue":
      return val.kind.value.values.map(wktValueToLocal);
    case "nullValue":
    case void 0:
      return null;
    default:
      return val.kind.value;
  }
}
function wktValueToReflect(json) {
  const value = {
    $typeName: "google.protobuf.Value",
    kind: { case: void 0 }
  };
  switch (typeof json) {
    case "number":
      value.kind = { case: "numberValue", value: json };
      break;
    case "string":
      value.kind = { case: "stringValue", value: json };
      break;
    case "boolean":
      value.kind = { case: "boolValue", value: json };
      break;
    case "object":
      if (json === null) {
        value.kind = { case: "nullValue", value: NULL_VALUE };
      } else if (Array.isArray(json)) {
        const listValue = {
          $typeName: "google.protobuf.ListValue",
          values: []
        };
        if (Array.isArray(json)) {
          for (const e of json) {
            listValue.values.push(wktValueToReflect(e));
          }
        }
        value.kind = {
          case: "listValue",
          value: listValue
        };
      } else {
        value.kind = {
          case: "structValue",
          value: wktStructToReflect(json)
        };
      }
      break;
  }
  return value;
}

// clients/typescript/node_modules/@bufbuild/protobuf/dist/esm/wire/base64-encoding.js
function base64Decode(base64Str) {
  const table = getDecodeTable();
  let es = base64Str.length * 3 / 4;
  if (base64Str[base64Str.length - 2] == "=")
    es -= 2;
  else if (base64Str[base64Str.length - 1] == "=")
    es -= 1;
  let bytes = new Uint8Array(es), bytePos = 0, groupPos = 0, b, p = 0;
  for (let i = 0; i < base64Str.length; i++) {
    b = table[base64Str.charCodeAt(i)];
    if (b === void 0) {
      switch (base64Str[i]) {
        // @ts-ignore TS7029: Fallthrough case in switch -- ignore instead of expect-error for compiler settings without noFallthroughCasesInSwitch: true
        case "=":
          groupPos = 0;
        // reset state when padding found
        case "\n":
        case "\r":
        case "	":
        case " ":
          continue;
        // skip white-space, and padding
        default:
          throw Error("invalid base64 string");
      }
    }
    switch (groupPos) {
      case 0:
        p = b;
        groupPos = 1;
        break;
      case 1:
        bytes[bytePos++] = p << 2 | (b & 48) >> 4;
        p = b;
        groupPos = 2;
        break;
      case 2:
        bytes[bytePos++] = (p & 15) << 4 | (b & 60) >> 2;
        p = b;
        groupPos = 3;
        break;
      case 3:
        bytes[bytePos++] = (p & 3) << 6 | b;
        groupPos = 0;
        break;
    }
  }
  if (groupPos == 1)
    throw Error("invalid base64 string");
  return bytes.subarray(0, bytePos);
}
function base64Encode(bytes, encoding = "std") {
  const table = getEncodeTable(encoding);
  const pad = encoding == "std";
  let base64 = "", groupPos = 0, b, p = 0;
  for (let i = 0; i < bytes.length; i++) {
    b = bytes[i];
    switch (groupPos) {
      case 0:
        base64 += table[b >> 2];
        p = (b & 3) << 4;
        groupPos = 1;
        break;
      case 1:
        base64 += table[p | b >> 4];
        p = (b & 15) << 2;
        groupPos = 2;
        break;
      case 2:
        base64 += table[p | b >> 6];
        base64 += table[b & 63];
        groupPos = 0;
        break;
    }
  }
  if (groupPos) {
    base64 += table[p];
    if (pad) {
      base64 += "=";
      if (groupPos == 1)
        base64 += "=";
    }
  }
  return base64;
}
var encodeTableStd;
var encodeTableUrl;
var decodeTable;
function getEncodeTable(encoding) {
  if (!encodeTableStd) {
    encodeTableStd = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".split("");
    encodeTableUrl = encodeTableStd.slice(0, -2).concat("-", "_");
  }
  return encoding == "url" ? (
    // biome-ignore lint/style/noNonNullAssertion: TS fails to narrow down
    encodeTableUrl
  ) : encodeTableStd;
}
function getDecodeTable() {
  if (!decodeTable) {
    decodeTable = [];
    const encodeTable = getEncodeTable("std");
    for (let i = 0; i < encodeTable.length; i++)
      decodeTable[encodeTable[i].charCodeAt(0)] = i;
    decodeTable["-".charCodeAt(0)] = encodeTable.indexOf("+");
    decodeTable["_".charCodeAt(0)] = encodeTable.indexOf("/");
  }
  return decodeTable;
}

// clients/typescript/node_modules/@bufbuild/protobuf/dist/esm/reflect/names.js
function protoCamelCase(snakeCase) {
  let capNext = false;
  const b = [];
  for (let i = 0; i < snakeCase.length; i++) {
    let c = snakeCase.charAt(i);
    switch (c) {
      case "_":
        capNext = true;
        break;
      case "0":
      case "1":
      case "2":
      case "3":
      case "4":
      case "5":
      case "6":
      case "7":
      case "8":
      case "9":
        b.push(c);
        capNext = false;
        break;
      default:
        if (capNext) {
          capNext = false;
          c = c.toUpperCase();
        }
        b.push(c);
        break;
    }
  }
  return b.join("");
}
function protoSnakeCase(lowerCamelCase) {
  return lowerCamelCase.replace(/[A-Z]/g, (letter) => "_" + letter.toLowerCase());
}
var reservedObjectProperties = /* @__PURE__ */ new Set([
  // names reserved by JavaScript
  "constructor",
  "toString",
  "toJSON",
  "valueOf"
]);
function safeObjectProperty(name) {
  return reservedObjectProperties.has(name) ? name + "$" : name;
}

// clients/typescript/node_modules/@bufbuild/protobuf/dist/esm/codegenv2/restore-json-names.js
function restoreJsonNames(message) {
  for (const f of message.field) {
    if (!unsafeIsSetExplicit(f, "jsonName")) {
      f.jsonName = protoCamelCase(f.name);
    }
  }
  message.nestedType.forEach(restoreJsonNames);
}

// clients/typescript/node_modules/@bufbuild/protobuf/dist/esm/wire/text-format.js
function parseTextFormatEnumValue(descEnum, value) {
  const enumValue = descEnum.values.find((v) => v.name === value);
  if (!enumValue) {
    throw new Error(`cannot parse ${descEnum} default value: ${value}`);
  }
  return enumValue.number;
}
function parseTextFormatScalarValue(type, value) {
  switch (type) {
    case ScalarType.STRING:
      return value;
    case ScalarType.BYTES: {
      const u = unescapeBytesDefaultValue(value);
      if (u === false) {
        throw new Error(`cannot parse ${ScalarType[type]} default value: ${value}`);
      }
      return u;
    }
    case ScalarType.INT64:
    case ScalarType.SFIXED64:
    case ScalarType.SINT64:
      return protoInt64.parse(value);
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return protoInt64.uParse(value);
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      switch (value) {
        case "inf":
          return Number.POSITIVE_INFINITY;
        case "-inf":
          return Number.NEGATIVE_INFINITY;
        case "nan":
          return Number.NaN;
        default:
          return parseFloat(value);
      }
    case ScalarType.BOOL:
      return value === "true";
    case ScalarType.INT32:
    case ScalarType.UINT32:
    case ScalarType.SINT32:
    case ScalarType.FIXED32:
    case ScalarType.SFIXED32:
      return parseInt(value, 10);
  }
}
function unescapeBytesDefaultValue(str) {
  const b = [];
  const input = {
    tail: str,
    c: "",
    next() {
      if (this.tail.length == 0) {
        return false;
      }
      this.c = this.tail[0];
      this.tail = this.tail.substring(1);
      return true;
    },
    take(n) {
      if (this.tail.length >= n) {
        const r = this.tail.substring(0, n);
        this.tail = this.tail.substring(n);
        return r;
      }
      return false;
    }
  };
  while (input.next()) {
    switch (input.c) {
      case "\\":
        if (input.next()) {
          switch (input.c) {
            case "\\":
              b.push(input.c.charCodeAt(0));
              break;
            case "b":
              b.push(8);
              break;
            case "f":
              b.push(12);
              break;
            case "n":
              b.push(10);
              break;
            case "r":
              b.push(13);
              break;
            case "t":
              b.push(9);
              break;
            case "v":
              b.push(11);
              break;
            case "0":
            case "1":
            case "2":
            case "3":
            case "4":
            case "5":
            case "6":
            case "7": {
              const s = input.c;
              const t = input.take(2);
              if (t === false) {
                return false;
              }
              const n = parseInt(s + t, 8);
              if (Number.isNaN(n)) {
                return false;
              }
              b.push(n);
              break;
            }
            case "x": {
              const s = input.c;
              const t = input.take(2);
              if (t === false) {
                return false;
              }
              const n = parseInt(s + t, 16);
              if (Number.isNaN(n)) {
                return false;
              }
              b.push(n);
              break;
            }
            case "u": {
              const s = input.c;
              const t = input.take(4);
              if (t === false) {
                return false;
              }
              const n = parseInt(s + t, 16);
              if (Number.isNaN(n)) {
                return false;
              }
              const chunk = new Uint8Array(4);
              const view = new DataView(chunk.buffer);
              view.setInt32(0, n, true);
              b.push(chunk[0], chunk[1], chunk[2], chunk[3]);
              break;
            }
            case "U": {
              const s = input.c;
              const t = input.take(8);
              if (t === false) {
                return false;
              }
              const tc = protoInt64.uEnc(s + t);
              const chunk = new Uint8Array(8);
              const view = new DataView(chunk.buffer);
              view.setInt32(0, tc.lo, true);
              view.setInt32(4, tc.hi, true);
              b.push(chunk[0], chunk[1], chunk[2], chunk[3], chunk[4], chunk[5], chunk[6], chunk[7]);
              break;
            }
          }
        }
        break;
      default:
        b.push(input.c.charCodeAt(0));
    }
  }
  return new Uint8Array(b);
}

// clients/typescript/node_modules/@bufbuild/protobuf/dist/esm/reflect/nested-types.js
function* nestedTypes(desc) {
  switch (desc.kind) {
    case "file":
      for (const message of desc.messages) {
        yield message;
        yield* nestedTypes(message);
      }
      yield* desc.enums;
      yield* desc.services;
      yield* desc.extensions;
      break;
    case "message":
      for (const message of desc.nestedMessages) {
        yield message;
        yield* nestedTypes(message);
      }
      yield* desc.nestedEnums;
      yield* desc.nestedExtensions;
      break;
  }
}

// clients/typescript/node_modules/@bufbuild/protobuf/dist/esm/registry.js
function createFileRegistry(...args) {
  const registry = createBaseRegistry();
  if (!args.length) {
    return registry;
  }
  if ("$typeName" in args[0] && args[0].$typeName == "google.protobuf.FileDescriptorSet") {
    for (const file of args[0].file) {
      addFile(file, registry);
    }
    return registry;
  }
  if ("$typeName" in args[0]) {
    let recurseDeps = function(file) {
      const deps = [];
      for (const protoFileName of file.dependency) {
        if (registry.getFile(protoFileName) != void 0) {
          continue;
        }
        if (seen.has(protoFileName)) {
          continue;
        }
        const dep = resolve(protoFileName);
        if (!dep) {
          throw new Error(`Unable to resolve ${protoFileName}, imported by ${file.name}`);
        }
        if ("kind" in dep) {
          registry.addFile(dep, false, true);
        } else {
          seen.add(dep.name);
          deps.push(dep);
        }
      }
      return deps.concat(...deps.map(recurseDeps));
    };
    const input = args[0];
    const resolve = args[1];
    const seen = /* @__PURE__ */ new Set();
    for (const file of [input, ...recurseDeps(input)].reverse()) {
      addFile(file, registry);
    }
  } else {
    for (const fileReg of args) {
      for (const file of fileReg.files) {
        registry.addFile(file);
      }
    }
  }
  return registry;
}
function createBaseRegistry() {
  const types = /* @__PURE__ */ new Map();
  const extendees = /* @__PURE__ */ new Map();
  const files = /* @__PURE__ */ new Map();
  return {
    kind: "registry",
    types,
    extendees,
    [Symbol.iterator]() {
      return types.values();
    },
    get files() {
      return files.values();
    },
    addFile(file, skipTypes, withDeps) {
      files.set(file.proto.name, file);
      if (!skipTypes) {
        for (const type of nestedTypes(file)) {
          this.add(type);
        }
      }
      if (withDeps) {
        for (const f of file.dependencies) {
          this.addFile(f, skipTypes, withDeps);
        }
      }
    },
    add(desc) {
      if (desc.kind == "extension") {
        let numberToExt = extendees.get(desc.extendee.typeName);
        if (!numberToExt) {
          extendees.set(
            desc.extendee.typeName,
            // biome-ignore lint/suspicious/noAssignInExpressions: no
            numberToExt = /* @__PURE__ */ new Map()
          );
        }
        numberToExt.set(desc.number, desc);
      }
      types.set(desc.typeName, desc);
    },
    get(typeName) {
      return types.get(typeName);
    },
    getFile(fileName) {
      return files.get(fileName);
    },
    getMessage(typeName) {
      const t = types.get(typeName);
      return (t === null || t === void 0 ? void 0 : t.kind) == "message" ? t : void 0;
    },
    getEnum(typeName) {
      const t = types.get(typeName);
      return (t === null || t === void 0 ? void 0 : t.kind) == "enum" ? t : void 0;
    },
    getExtension(typeName) {
      const t = types.get(typeName);
      return (t === null || t === void 0 ? void 0 : t.kind) == "extension" ? t : void 0;
    },
    getExtensionFor(extendee, no) {
      var _a;
      return (_a = extendees.get(extendee.typeName)) === null || _a === void 0 ? void 0 : _a.get(no);
    },
    getService(typeName) {
      const t = types.get(typeName);
      return (t === null || t === void 0 ? void 0 : t.kind) == "service" ? t : void 0;
    }
  };
}
var EDITION_PROTO22 = 998;
var EDITION_PROTO32 = 999;
var EDITION_UNSTABLE = 9999;
var TYPE_STRING = 9;
var TYPE_GROUP = 10;
var TYPE_MESSAGE = 11;
var TYPE_BYTES = 12;
var TYPE_ENUM = 14;
var LABEL_REPEATED = 3;
var LABEL_REQUIRED = 2;
var JS_STRING = 1;
var IDEMPOTENCY_UNKNOWN = 0;
var EXPLICIT = 1;
var IMPLICIT3 = 2;
var LEGACY_REQUIRED = 3;
var PACKED = 1;
var DELIMITED = 2;
var OPEN = 1;
var VERIFY = 2;
var maximumEdition = 1001;
var featureDefaults = {
  // EDITION_PROTO2
  998: {
    fieldPresence: 1,
    // EXPLICIT,
    enumType: 2,
    // CLOSED,
    repeatedFieldEncoding: 2,
    // EXPANDED,
    utf8Validation: 3,
    // NONE,
    messageEncoding: 1,
    // LENGTH_PREFIXED,
    jsonFormat: 2,
    // LEGACY_BEST_EFFORT,
    enforceNamingStyle: 2,
    // STYLE_LEGACY,
    defaultSymbolVisibility: 1
    // EXPORT_ALL,
  },
  // EDITION_PROTO3
  999: {
    fieldPresence: 2,
    // IMPLICIT,
    enumType: 1,
    // OPEN,
    repeatedFieldEncoding: 1,
    // PACKED,
    utf8Validation: 2,
    // VERIFY,
    messageEncoding: 1,
    // LENGTH_PREFIXED,
    jsonFormat: 1,
    // ALLOW,
    enforceNamingStyle: 2,
    // STYLE_LEGACY,
    defaultSymbolVisibility: 1
    // EXPORT_ALL,
  },
  // EDITION_2023
  1e3: {
    fieldPresence: 1,
    // EXPLICIT,
    enumType: 1,
    // OPEN,
    repeatedFieldEncoding: 1,
    // PACKED,
    utf8Validation: 2,
    // VERIFY,
    messageEncoding: 1,
    // LENGTH_PREFIXED,
    jsonFormat: 1,
    // ALLOW,
    enforceNamingStyle: 2,
    // STYLE_LEGACY,
    defaultSymbolVisibility: 1
    // EXPORT_ALL,
  },
  // EDITION_2024
  1001: {
    fieldPresence: 1,
    // EXPLICIT,
    enumType: 1,
    // OPEN,
    repeatedFieldEncoding: 1,
    // PACKED,
    utf8Validation: 2,
    // VERIFY,
    messageEncoding: 1,
    // LENGTH_PREFIXED,
    jsonFormat: 1,
    // ALLOW,
    enforceNamingStyle: 1,
    // STYLE2024,
    defaultSymbolVisibility: 2
    // EXPORT_TOP_LEVEL,
  }
};
function addFile(proto, reg) {
  var _a, _b;
  const file = {
    kind: "file",
    proto,
    deprecated: (_b = (_a = proto.options) === null || _a === void 0 ? void 0 : _a.deprecated) !== null && _b !== void 0 ? _b : false,
    edition: getFileEdition(proto),
    name: proto.name.replace(/\.proto$/, ""),
    dependencies: findFileDependencies(proto, reg),
    enums: [],
    messages: [],
    extensions: [],
    services: [],
    toString() {
      return `file ${proto.name}`;
    }
  };
  const mapEntriesStore = /* @__PURE__ */ new Map();
  const mapEntries = {
    get(typeName) {
      return mapEntriesStore.get(typeName);
    },
    add(desc) {
      var _a2;
      assert(((_a2 = desc.proto.options) === null || _a2 === void 0 ? void 0 : _a2.mapEntry) === true);
      mapEntriesStore.set(desc.typeName, desc);
    }
  };
  for (const enumProto of proto.enumType) {
    addEnum(enumProto, file, void 0, reg);
  }
  for (const messageProto of proto.messageType) {
    addMessage(messageProto, file, void 0, reg, mapEntries);
  }
  for (const serviceProto of proto.service) {
    addService(serviceProto, file, reg);
  }
  addExtensions(file, reg);
  for (const mapEntry of mapEntriesStore.values()) {
    addFields(mapEntry, reg, mapEntries);
  }
  for (const message of file.messages) {
    addFields(message, reg, mapEntries);
    addExtensions(message, reg);
  }
  reg.addFile(file, true);
}
function addExtensions(desc, reg) {
  switch (desc.kind) {
    case "file":
      for (const proto of desc.proto.extension) {
        const ext = newField(proto, desc, reg);
        desc.extensions.push(ext);
        reg.add(ext);
      }
      break;
    case "message":
      for (const proto of desc.proto.extension) {
        const ext = newField(proto, desc, reg);
        desc.nestedExtensions.push(ext);
        reg.add(ext);
      }
      for (const message of desc.nestedMessages) {
        addExtensions(message, reg);
      }
      break;
  }
}
function addFields(message, reg, mapEntries) {
  const allOneofs = message.proto.oneofDecl.map((proto) => newOneof(proto, message));
  const oneofsSeen = /* @__PURE__ */ new Set();
  for (const proto of message.proto.field) {
    const oneof = findOneof(proto, allOneofs);
    const field2 = newField(proto, message, reg, oneof, mapEntries);
    message.fields.push(field2);
    message.field[field2.localName] = field2;
    if (oneof === void 0) {
      message.members.push(field2);
    } else {
      oneof.fields.push(field2);
      if (!oneofsSeen.has(oneof)) {
        oneofsSeen.add(oneof);
        message.members.push(oneof);
      }
    }
  }
  for (const oneof of allOneofs.filter((o) => oneofsSeen.has(o))) {
    message.oneofs.push(oneof);
  }
  for (const child of message.nestedMessages) {
    addFields(child, reg, mapEntries);
  }
}
function addEnum(proto, file, parent, reg) {
  var _a, _b, _c, _d, _e;
  const sharedPrefix = findEnumSharedPrefix(proto.name, proto.value);
  const desc = {
    kind: "enum",
    proto,
    deprecated: (_b = (_a = proto.options) === null || _a === void 0 ? void 0 : _a.deprecated) !== null && _b !== void 0 ? _b : false,
    file,
    parent,
    open: true,
    name: proto.name,
    typeName: makeTypeName(proto, parent, file),
    value: {},
    values: [],
    sharedPrefix,
    toString() {
      return `enum ${this.typeName}`;
    }
  };
  desc.open = isEnumOpen(desc);
  reg.add(desc);
  for (const p of proto.value) {
    const name = p.name;
    desc.values.push(
      // biome-ignore lint/suspicious/noAssignInExpressions: no
      desc.value[p.number] = {
        kind: "enum_value",
        proto: p,
        deprecated: (_d = (_c = p.options) === null || _c === void 0 ? void 0 : _c.deprecated) !== null && _d !== void 0 ? _d : false,
        parent: desc,
        name,
        localName: safeObjectProperty(sharedPrefix == void 0 ? name : name.substring(sharedPrefix.length)),
        number: p.number,
        toString() {
          return `enum value ${desc.typeName}.${name}`;
        }
      }
    );
  }
  ((_e = parent === null || parent === void 0 ? void 0 : parent.nestedEnums) !== null && _e !== void 0 ? _e : file.enums).push(desc);
}
function addMessage(proto, file, parent, reg, mapEntries) {
  var _a, _b, _c, _d;
  const desc = {
    kind: "message",
    proto,
    deprecated: (_b = (_a = proto.options) === null || _a === void 0 ? void 0 : _a.deprecated) !== null && _b !== void 0 ? _b : false,
    file,
    parent,
    name: proto.name,
    typeName: makeTypeName(proto, parent, file),
    fields: [],
    field: {},
    oneofs: [],
    members: [],
    nestedEnums: [],
    nestedMessages: [],
    nestedExtensions: [],
    toString() {
      return `message ${this.typeName}`;
    }
  };
  if (((_c = proto.options) === null || _c === void 0 ? void 0 : _c.mapEntry) === true) {
    mapEntries.add(desc);
  } else {
    ((_d = parent === null || parent === void 0 ? void 0 : parent.nestedMessages) !== null && _d !== void 0 ? _d : file.messages).push(desc);
    reg.add(desc);
  }
  for (const enumProto of proto.enumType) {
    addEnum(enumProto, file, desc, reg);
  }
  for (const messageProto of proto.nestedType) {
    addMessage(messageProto, file, desc, reg, mapEntries);
  }
}
function addService(proto, file, reg) {
  var _a, _b;
  const desc = {
    kind: "service",
    proto,
    deprecated: (_b = (_a = proto.options) === null || _a === void 0 ? void 0 : _a.deprecated) !== null && _b !== void 0 ? _b : false,
    file,
    name: proto.name,
    typeName: makeTypeName(proto, void 0, file),
    methods: [],
    method: {},
    toString() {
      return `service ${this.typeName}`;
    }
  };
  file.services.push(desc);
  reg.add(desc);
  for (const methodProto of proto.method) {
    const method = newMethod(methodProto, desc, reg);
    desc.methods.push(method);
    desc.method[method.localName] = method;
  }
}
function newMethod(proto, parent, reg) {
  var _a, _b, _c, _d;
  let methodKind;
  if (proto.clientStreaming && proto.serverStreaming) {
    methodKind = "bidi_streaming";
  } else if (proto.clientStreaming) {
    methodKind = "client_streaming";
  } else if (proto.serverStreaming) {
    methodKind = "server_streaming";
  } else {
    methodKind = "unary";
  }
  const input = reg.getMessage(trimLeadingDot(proto.inputType));
  const output = reg.getMessage(trimLeadingDot(proto.outputType));
  assert(input, `invalid MethodDescriptorProto: input_type ${proto.inputType} not found`);
  assert(output, `invalid MethodDescriptorProto: output_type ${proto.inputType} not found`);
  const name = proto.name;
  return {
    kind: "rpc",
    proto,
    deprecated: (_b = (_a = proto.options) === null || _a === void 0 ? void 0 : _a.deprecated) !== null && _b !== void 0 ? _b : false,
    parent,
    name,
    localName: safeObjectProperty(name.length ? safeObjectProperty(name[0].toLowerCase() + name.substring(1)) : name),
    methodKind,
    input,
    output,
    idempotency: (_d = (_c = proto.options) === null || _c === void 0 ? void 0 : _c.idempotencyLevel) !== null && _d !== void 0 ? _d : IDEMPOTENCY_UNKNOWN,
    toString() {
      return `rpc ${parent.typeName}.${name}`;
    }
  };
}
function newOneof(proto, parent) {
  return {
    kind: "oneof",
    proto,
    deprecated: false,
    parent,
    fields: [],
    name: proto.name,
    localName: safeObjectProperty(protoCamelCase(proto.name)),
    toString() {
      return `oneof ${parent.typeName}.${this.name}`;
    }
  };
}
function newField(proto, parentOrFile, reg, oneof, mapEntries) {
  var _a, _b, _c;
  const isExtension = mapEntries === void 0;
  const field2 = {
    kind: "field",
    proto,
    deprecated: (_b = (_a = proto.options) === null || _a === void 0 ? void 0 : _a.deprecated) !== null && _b !== void 0 ? _b : false,
    name: proto.name,
    number: proto.number,
    scalar: void 0,
    message: void 0,
    enum: void 0,
    presence: getFieldPresence(proto, oneof, isExtension, parentOrFile),
    utf8Validation: isUtf8Validated(proto, parentOrFile),
    listKind: void 0,
    mapKind: void 0,
    mapKey: void 0,
    delimitedEncoding: void 0,
    packed: void 0,
    longAsString: false,
    getDefaultValue: void 0
  };
  if (isExtension) {
    const file = parentOrFile.kind == "file" ? parentOrFile : parentOrFile.file;
    const parent = parentOrFile.kind == "file" ? void 0 : parentOrFile;
    const typeName = makeTypeName(proto, parent, file);
    field2.kind = "extension";
    field2.file = file;
    field2.parent = parent;
    field2.oneof = void 0;
    field2.typeName = typeName;
    field2.jsonName = `[${typeName}]`;
    field2.toString = () => `extension ${typeName}`;
    const extendee = reg.getMessage(trimLeadingDot(proto.extendee));
    assert(extendee, `invalid FieldDescriptorProto: extendee ${proto.extendee} not found`);
    field2.extendee = extendee;
  } else {
    const parent = parentOrFile;
    assert(parent.kind == "message");
    field2.parent = parent;
    field2.oneof = oneof;
    field2.localName = oneof ? protoCamelCase(proto.name) : safeObjectProperty(protoCamelCase(proto.name));
    field2.jsonName = proto.jsonName;
    field2.toString = () => `field ${parent.typeName}.${proto.name}`;
  }
  const label = proto.label;
  const type = proto.type;
  const jstype = (_c = proto.options) === null || _c === void 0 ? void 0 : _c.jstype;
  if (label === LABEL_REPEATED) {
    const mapEntry = type == TYPE_MESSAGE ? mapEntries === null || mapEntries === void 0 ? void 0 : mapEntries.get(trimLeadingDot(proto.typeName)) : void 0;
    if (mapEntry) {
      field2.fieldKind = "map";
      const { key, value } = findMapEntryFields(mapEntry);
      field2.mapKey = key.scalar;
      field2.mapKind = value.fieldKind;
      field2.message = value.message;
      field2.delimitedEncoding = false;
      field2.enum = value.enum;
      field2.scalar = value.scalar;
      return field2;
    }
    field2.fieldKind = "list";
    switch (type) {
      case TYPE_MESSAGE:
      case TYPE_GROUP:
        field2.listKind = "message";
        field2.message = reg.getMessage(trimLeadingDot(proto.typeName));
        assert(field2.message);
        field2.delimitedEncoding = isDelimitedEncoding(proto, parentOrFile);
        break;
      case TYPE_ENUM:
        field2.listKind = "enum";
        field2.enum = reg.getEnum(trimLeadingDot(proto.typeName));
        assert(field2.enum);
        break;
      default:
        field2.listKind = "scalar";
        field2.scalar = type;
        field2.longAsString = jstype == JS_STRING;
        break;
    }
    field2.packed = isPackedField(proto, parentOrFile);
    return field2;
  }
  switch (type) {
    case TYPE_MESSAGE:
    case TYPE_GROUP:
      field2.fieldKind = "message";
      field2.message = reg.getMessage(trimLeadingDot(proto.typeName));
      assert(field2.message, `invalid FieldDescriptorProto: type_name ${proto.typeName} not found`);
      field2.delimitedEncoding = isDelimitedEncoding(proto, parentOrFile);
      field2.getDefaultValue = () => void 0;
      break;
    case TYPE_ENUM: {
      const enumeration = reg.getEnum(trimLeadingDot(proto.typeName));
      assert(enumeration !== void 0, `invalid FieldDescriptorProto: type_name ${proto.typeName} not found`);
      field2.fieldKind = "enum";
      field2.enum = reg.getEnum(trimLeadingDot(proto.typeName));
      field2.getDefaultValue = () => {
        return unsafeIsSetExplicit(proto, "defaultValue") ? parseTextFormatEnumValue(enumeration, proto.defaultValue) : void 0;
      };
      break;
    }
    default: {
      field2.fieldKind = "scalar";
      field2.scalar = type;
      field2.longAsString = jstype == JS_STRING;
      field2.getDefaultValue = () => {
        return unsafeIsSetExplicit(proto, "defaultValue") ? parseTextFormatScalarValue(type, proto.defaultValue) : void 0;
      };
      break;
    }
  }
  return field2;
}
function getFileEdition(proto) {
  switch (proto.syntax) {
    case "":
    case "proto2":
      return EDITION_PROTO22;
    case "proto3":
      return EDITION_PROTO32;
    case "editions":
      if (proto.edition === EDITION_UNSTABLE) {
        return maximumEdition;
      }
      if (proto.edition in featureDefaults) {
        return proto.edition;
      }
      throw new Error(`${proto.name}: unsupported edition`);
    default:
      throw new Error(`${proto.name}: unsupported syntax "${proto.syntax}"`);
  }
}
function findFileDependencies(proto, reg) {
  return proto.dependency.map((wantName) => {
    const dep = reg.getFile(wantName);
    if (!dep) {
      throw new Error(`Cannot find ${wantName}, imported by ${proto.name}`);
    }
    return dep;
  });
}
function findEnumSharedPrefix(enumName2, values) {
  const prefix = camelToSnakeCase(enumName2) + "_";
  for (const value of values) {
    if (!value.name.toLowerCase().startsWith(prefix)) {
      return void 0;
    }
    const shortName = value.name.substring(prefix.length);
    if (shortName.length == 0) {
      return void 0;
    }
    if (/^\d/.test(shortName)) {
      return void 0;
    }
  }
  return prefix;
}
function camelToSnakeCase(camel) {
  return (camel.substring(0, 1) + camel.substring(1).replace(/[A-Z]/g, (c) => "_" + c)).toLowerCase();
}
function makeTypeName(proto, parent, file) {
  let typeName;
  if (parent) {
    typeName = `${parent.typeName}.${proto.name}`;
  } else if (file.proto.package.length > 0) {
    typeName = `${file.proto.package}.${proto.name}`;
  } else {
    typeName = `${proto.name}`;
  }
  return typeName;
}
function trimLeadingDot(typeName) {
  return typeName.startsWith(".") ? typeName.substring(1) : typeName;
}
function findOneof(proto, allOneofs) {
  if (!unsafeIsSetExplicit(proto, "oneofIndex")) {
    return void 0;
  }
  if (proto.proto3Optional) {
    return void 0;
  }
  const oneof = allOneofs[proto.oneofIndex];
  assert(oneof, `invalid FieldDescriptorProto: oneof #${proto.oneofIndex} for field #${proto.number} not found`);
  return oneof;
}
function getFieldPresence(proto, oneof, isExtension, parent) {
  if (proto.label == LABEL_REQUIRED) {
    return LEGACY_REQUIRED;
  }
  if (proto.label == LABEL_REPEATED) {
    return IMPLICIT3;
  }
  if (!!oneof || proto.proto3Optional) {
    return EXPLICIT;
  }
  if (isExtension) {
    return EXPLICIT;
  }
  const resolved = resolveFeature("fieldPresence", { proto, parent });
  if (resolved == IMPLICIT3 && (proto.type == TYPE_MESSAGE || proto.type == TYPE_GROUP)) {
    return EXPLICIT;
  }
  return resolved;
}
function isPackedField(proto, parent) {
  if (proto.label != LABEL_REPEATED) {
    return false;
  }
  switch (proto.type) {
    case TYPE_STRING:
    case TYPE_BYTES:
    case TYPE_GROUP:
    case TYPE_MESSAGE:
      return false;
  }
  const o = proto.options;
  if (o && unsafeIsSetExplicit(o, "packed")) {
    return o.packed;
  }
  return PACKED == resolveFeature("repeatedFieldEncoding", {
    proto,
    parent
  });
}
function findMapEntryFields(mapEntry) {
  const key = mapEntry.fields.find((f) => f.number === 1);
  const value = mapEntry.fields.find((f) => f.number === 2);
  assert(key && key.fieldKind == "scalar" && key.scalar != ScalarType.BYTES && key.scalar != ScalarType.FLOAT && key.scalar != ScalarType.DOUBLE && value && value.fieldKind != "list" && value.fieldKind != "map");
  return { key, value };
}
function isEnumOpen(desc) {
  var _a;
  return OPEN == resolveFeature("enumType", {
    proto: desc.proto,
    parent: (_a = desc.parent) !== null && _a !== void 0 ? _a : desc.file
  });
}
function isDelimitedEncoding(proto, parent) {
  if (proto.type == TYPE_GROUP) {
    return true;
  }
  return DELIMITED == resolveFeature("messageEncoding", {
    proto,
    parent
  });
}
function isUtf8Validated(proto, parent) {
  return VERIFY == resolveFeature("utf8Validation", {
    proto,
    parent
  });
}
function resolveFeature(name, ref) {
  var _a, _b;
  const featureSet = (_a = ref.proto.options) === null || _a === void 0 ? void 0 : _a.features;
  if (featureSet) {
    const val = featureSet[name];
    if (val != 0) {
      return val;
    }
  }
  if ("kind" in ref) {
    if (ref.kind == "message") {
      return resolveFeature(name, (_b = ref.parent) !== null && _b !== void 0 ? _b : ref.file);
    }
    const editionDefaults = featureDefaults[ref.edition];
    if (!editionDefaults) {
      throw new Error(`feature default for edition ${ref.edition} not found`);
    }
    return editionDefaults[name];
  }
  return resolveFeature(name, ref.parent);
}
function assert(condition, msg) {
  if (!condition) {
    throw new Error(msg);
  }
}

// clients/typescript/node_modules/@bufbuild/protobuf/dist/esm/codegenv2/boot.js
function boot(boot2) {
  const root = bootFileDescriptorProto(boot2);
  root.messageType.forEach(restoreJsonNames);
  const reg = createFileRegistry(root, () => void 0);
  return reg.getFile(root.name);
}
function bootFileDescriptorProto(init) {
  const proto = /* @__PURE__ */ Object.create({
    syntax: "",
    edition: 0
  });
  return Object.assign(proto, Object.assign(Object.assign({ $typeName: "google.protobuf.FileDescriptorProto", dependency: [], publicDependency: [], weakDependency: [], optionDependency: [], service: [], extension: [] }, init), { messageType: init.messageType.map(bootDescriptorProto), enumType: init.enumType.map(bootEnumDescriptorProto) }));
}
function bootDescriptorProto(init) {
  var _a, _b, _c, _d, _e, _f, _g, _h;
  const proto = /* @__PURE__ */ Object.create({
    visibility: 0
  });
  return Object.assign(proto, {
    $typeName: "google.protobuf.DescriptorProto",
    name: init.name,
    field: (_b = (_a = init.field) === null || _a === void 0 ? void 0 : _a.map(bootFieldDescriptorProto)) !== null && _b !== void 0 ? _b : [],
    extension: [],
    nestedType: (_d = (_c = init.nestedType) === null || _c === void 0 ? void 0 : _c.map(bootDescriptorProto)) !== null && _d !== void 0 ? _d : [],
    enumType: (_f = (_e = init.enumType) === null || _e === void 0 ? void 0 : _e.map(bootEnumDescriptorProto)) !== null && _f !== void 0 ? _f : [],
    extensionRange: (_h = (_g = init.extensionRange) === null || _g === void 0 ? void 0 : _g.map((e) => Object.assign({ $typeName: "google.protobuf.DescriptorProto.ExtensionRange" }, e))) !== null && _h !== void 0 ? _h : [],
    oneofDecl: [],
    reservedRange: [],
    reservedName: []
  });
}
function bootFieldDescriptorProto(init) {
  const proto = /* @__PURE__ */ Object.create({
    label: 1,
    typeName: "",
    extendee: "",
    defaultValue: "",
    oneofIndex: 0,
    jsonName: "",
    proto3Optional: false
  });
  return Object.assign(proto, Object.assign(Object.assign({ $typeName: "google.protobuf.FieldDescriptorProto" }, init), { options: init.options ? bootFieldOptions(init.options) : void 0 }));
}
function bootFieldOptions(init) {
  var _a, _b, _c;
  const proto = /* @__PURE__ */ Object.create({
    ctype: 0,
    packed: false,
    jstype: 0,
    lazy: false,
    unverifiedLazy: false,
    deprecated: false,
    weak: false,
    debugRedact: false,
    retention: 0
  });
  return Object.assign(proto, Object.assign(Object.assign({ $typeName: "google.protobuf.FieldOptions" }, init), { targets: (_a = init.targets) !== null && _a !== void 0 ? _a : [], editionDefaults: (_c = (_b = init.editionDefaults) === null || _b === void 0 ? void 0 : _b.map((e) => Object.assign({ $typeName: "google.protobuf.FieldOptions.EditionDefault" }, e))) !== null && _c !== void 0 ? _c : [], uninterpretedOption: [] }));
}
function bootEnumDescriptorProto(init) {
  const proto = /* @__PURE__ */ Object.create({
    visibility: 0
  });
  return Object.assign(proto, {
    $typeName: "google.protobuf.EnumDescriptorProto",
    name: init.name,
    reservedName: [],
    reservedRange: [],
    value: init.value.map((e) => Object.assign({ $typeName: "google.protobuf.EnumValueDescriptorProto" }, e))
  });
}

// clients/typescript/node_modules/@bufbuild/protobuf/dist/esm/codegenv2/message.js
function messageDesc(file, path, ...paths) {
  return paths.reduce((acc, cur) => acc.nestedMessages[cur], file.messages[path]);
}

// clients/typescript/node_modules/@bufbuild/protobuf/dist/esm/wkt/gen/google/protobuf/descriptor_pb.js
var file_google_protobuf_descriptor = /* @__PURE__ */ boot({ "name": "google/protobuf/descriptor.proto", "package": "google.protobuf", "messageType": [{ "name": "FileDescriptorSet", "field": [{ "name": "file", "number": 1, "type": 11, "label": 3, "typeName": ".google.protobuf.FileDescriptorProto" }], "extensionRange": [{ "start": 536e6, "end": 536000001 }] }, { "name": "FileDescriptorProto", "field": [{ "name": "name", "number": 1, "type": 9, "label": 1 }, { "name": "package", "number": 2, "type": 9, "label": 1 }, { "name": "dependency", "number": 3, "type": 9, "label": 3 }, { "name": "public_dependency", "number": 10, "type": 5, "label": 3 }, { "name": "weak_dependency", "number": 11, "type": 5, "label": 3 }, { "name": "option_dependency", "number": 15, "type": 9, "label": 3 }, { "name": "message_type", "number": 4, "type": 11, "label": 3, "typeName": ".google.protobuf.DescriptorProto" }, { "name": "enum_type", "number": 5, "type": 11, "label": 3, "typeName": ".google.protobuf.EnumDescriptorProto" }, { "name": "service", "number": 6, "type": 11, "label": 3, "typeName": ".google.protobuf.ServiceDescriptorProto" }, { "name": "extension", "number": 7, "type": 11, "label": 3, "typeName": ".google.protobuf.FieldDescriptorProto" }, { "name": "options", "number": 8, "type": 11, "label": 1, "typeName": ".google.protobuf.FileOptions" }, { "name": "source_code_info", "number": 9, "type": 11, "label": 1, "typeName": ".google.protobuf.SourceCodeInfo" }, { "name": "syntax", "number": 12, "type": 9, "label": 1 }, { "name": "edition", "number": 14, "type": 14, "label": 1, "typeName": ".google.protobuf.Edition" }] }, { "name": "DescriptorProto", "field": [{ "name": "name", "number": 1, "type": 9, "label": 1 }, { "name": "field", "number": 2, "type": 11, "label": 3, "typeName": ".google.protobuf.FieldDescriptorProto" }, { "name": "extension", "number": 6, "type": 11, "label": 3, "typeName": ".google.protobuf.FieldDescriptorProto" }, { "name": "nested_type", "number": 3, "type": 11, "label": 3, "typeName": ".google.protobuf.DescriptorProto" }, { "name": "enum_type", "number": 4, "type": 11, "label": 3, "typeName": ".google.protobuf.EnumDescriptorProto" }, { "name": "extension_range", "number": 5, "type": 11, "label": 3, "typeName": ".google.protobuf.DescriptorProto.ExtensionRange" }, { "name": "oneof_decl", "number": 8, "type": 11, "label": 3, "typeName": ".google.protobuf.OneofDescriptorProto" }, { "name": "options", "number": 7, "type": 11, "label": 1, "typeName": ".google.protobuf.MessageOptions" }, { "name": "reserved_range", "number": 9, "type": 11, "label": 3, "typeName": ".google.protobuf.DescriptorProto.ReservedRange" }, { "name": "reserved_name", "number": 10, "type": 9, "label": 3 }, { "name": "visibility", "number": 11, "type": 14, "label": 1, "typeName": ".google.protobuf.SymbolVisibility" }], "nestedType": [{ "name": "ExtensionRange", "field": [{ "name": "start", "number": 1, "type": 5, "label": 1 }, { "name": "end", "number": 2, "type": 5, "label": 1 }, { "name": "options", "number": 3, "type": 11, "label": 1, "typeName": ".google.protobuf.ExtensionRangeOptions" }] }, { "name": "ReservedRange", "field": [{ "name": "start", "number": 1, "type": 5, "label": 1 }, { "name": "end", "number": 2, "type": 5, "label": 1 }] }] }, { "name": "ExtensionRangeOptions", "field": [{ "name": "uninterpreted_option", "number": 999, "type": 11, "label": 3, "typeName": ".google.protobuf.UninterpretedOption" }, { "name": "declaration", "number": 2, "type": 11, "label": 3, "typeName": ".google.protobuf.ExtensionRangeOptions.Declaration", "options": { "retention": 2 } }, { "name": "features", "number": 50, "type": 11, "label": 1, "typeName": ".google.protobuf.FeatureSet" }, { "name": "verification", "number": 3, "type": 14, "label": 1, "typeName": ".google.protobuf.ExtensionRangeOptions.VerificationState", "defaultValue": "UNVERIFIED", "options": { "retention": 2 } }], "nestedType": [{ "name": "Declaration", "field": [{ "name": "number", "number": 1, "type": 5, "label": 1 }, { "name": "full_name", "number": 2, "type": 9, "label": 1 }, { "name": "type", "number": 3, "type": 9, "label": 1 }, { "name": "reserved", "number": 5, "type": 8, "label": 1 }, { "name": "repeated", "number": 6, "type": 8, "label": 1 }] }], "enumType": [{ "name": "VerificationState", "value": [{ "name": "DECLARATION", "number": 0 }, { "name": "UNVERIFIED", "number": 1 }] }], "extensionRange": [{ "start": 1e3, "end": 536870912 }] }, { "name": "FieldDescriptorProto", "field": [{ "name": "name", "number": 1, "type": 9, "label": 1 }, { "name": "number", "number": 3, "type": 5, "label": 1 }, { "name": "label", "number": 4, "type": 14, "label": 1, "typeName": ".google.protobuf.FieldDescriptorProto.Label" }, { "name": "type", "number": 5, "type": 14, "label": 1, "typeName": ".google.protobuf.FieldDescriptorProto.Type" }, { "name": "type_name", "number": 6, "type": 9, "label": 1 }, { "name": "extendee", "number": 2, "type": 9, "label": 1 }, { "name": "default_value", "number": 7, "type": 9, "label": 1 }, { "name": "oneof_index", "number": 9, "type": 5, "label": 1 }, { "name": "json_name", "number": 10, "type": 9, "label": 1 }, { "name": "options", "number": 8, "type": 11, "label": 1, "typeName": ".google.protobuf.FieldOptions" }, { "name": "proto3_optional", "number": 17, "type": 8, "label": 1 }], "enumType": [{ "name": "Type", "value": [{ "name": "TYPE_DOUBLE", "number": 1 }, { "name": "TYPE_FLOAT", "number": 2 }, { "name": "TYPE_INT64", "number": 3 }, { "name": "TYPE_UINT64", "number": 4 }, { "name": "TYPE_INT32", "number": 5 }, { "name": "TYPE_FIXED64", "number": 6 }, { "name": "TYPE_FIXED32", "number": 7 }, { "name": "TYPE_BOOL", "number": 8 }, { "name": "TYPE_STRING", "number": 9 }, { "name": "TYPE_GROUP", "number": 10 }, { "name": "TYPE_MESSAGE", "number": 11 }, { "name": "TYPE_BYTES", "number": 12 }, { "name": "TYPE_UINT32", "number": 13 }, { "name": "TYPE_ENUM", "number": 14 }, { "name": "TYPE_SFIXED32", "number": 15 }, { "name": "TYPE_SFIXED64", "number": 16 }, { "name": "TYPE_SINT32", "number": 17 }, { "name": "TYPE_SINT64", "number": 18 }] }, { "name": "Label", "value": [{ "name": "LABEL_OPTIONAL", "number": 1 }, { "name": "LABEL_REPEATED", "number": 3 }, { "name": "LABEL_REQUIRED", "number": 2 }] }] }, { "name": "OneofDescriptorProto", "field": [{ "name": "name", "number": 1, "type": 9, "label": 1 }, { "name": "options", "number": 2, "type": 11, "label": 1, "typeName": ".google.protobuf.OneofOptions" }] }, { "name": "EnumDescriptorProto", "field": [{ "name": "name", "number": 1, "type": 9, "label": 1 }, { "name": "value", "number": 2, "type": 11, "label": 3, "typeName": ".google.protobuf.EnumValueDescriptorProto" }, { "name": "options", "number": 3, "type": 11, "label": 1, "typeName": ".google.protobuf.EnumOptions" }, { "name": "reserved_range", "number": 4, "type": 11, "label": 3, "typeName": ".google.protobuf.EnumDescriptorProto.EnumReservedRange" }, { "name": "reserved_name", "number": 5, "type": 9, "label": 3 }, { "name": "visibility", "number": 6, "type": 14, "label": 1, "typeName": ".google.protobuf.SymbolVisibility" }], "nestedType": [{ "name": "EnumReservedRange", "field": [{ "name": "start", "number": 1, "type": 5, "label": 1 }, { "name": "end", "number": 2, "type": 5, "label": 1 }] }] }, { "name": "EnumValueDescriptorProto", "field": [{ "name": "name", "number": 1, "type": 9, "label": 1 }, { "name": "number", "number": 2, "type": 5, "label": 1 }, { "name": "options", "number": 3, "type": 11, "label": 1, "typeName": ".google.protobuf.EnumValueOptions" }] }, { "name": "ServiceDescriptorProto", "field": [{ "name": "name", "number": 1, "type": 9, "label": 1 }, { "name": "method", "number": 2, "type": 11, "label": 3, "typeName": ".google.protobuf.MethodDescriptorProto" }, { "name": "options", "number": 3, "type": 11, "label": 1, "typeName": ".google.protobuf.ServiceOptions" }] }, { "name": "MethodDescriptorProto", "field": [{ "name": "name", "number": 1, "type": 9, "label": 1 }, { "name": "input_type", "number": 2, "type": 9, "label": 1 }, { "name": "output_type", "number": 3, "type": 9, "label": 1 }, { "name": "options", "number": 4, "type": 11, "label": 1, "typeName": ".google.protobuf.MethodOptions" }, { "name": "client_streaming", "number": 5, "type": 8, "label": 1, "defaultValue": "false" }, { "name": "server_streaming", "number": 6, "type": 8, "label": 1, "defaultValue": "false" }] }, { "name": "FileOptions", "field": [{ "name": "java_package", "number": 1, "type": 9, "label": 1 }, { "name": "java_outer_classname", "number": 8, "type": 9, "label": 1 }, { "name": "java_multiple_files", "number": 10, "type": 8, "label": 1, "defaultValue": "false", "options": {} }, { "name": "java_generate_equals_and_hash", "number": 20, "type": 8, "label": 1, "options": { "deprecated": true } }, { "name": "java_string_check_utf8", "number": 27, "type": 8, "label": 1, "defaultValue": "false" }, { "name": "optimize_for", "number": 9, "type": 14, "label": 1, "typeName": ".google.protobuf.FileOptions.OptimizeMode", "defaultValue": "SPEED" }, { "name": "go_package", "number": 11, "type": 9, "label": 1 }, { "name": "cc_generic_services", "number": 16, "type": 8, "label": 1, "defaultValue": "false" }, { "name": "java_generic_services", "number": 17, "type": 8, "label": 1, "defaultValue": "false" }, { "name": "py_generic_services", "number": 18, "type": 8, "label": 1, "defaultValue": "false" }, { "name": "deprecated", "number": 23, "type": 8, "label": 1, "defaultValue": "false" }, { "name": "cc_enable_arenas", "number": 31, "type": 8, "label": 1, "defaultValue": "true" }, { "name": "objc_class_prefix", "number": 36, "type": 9, "label": 1 }, { "name": "csharp_namespace", "number": 37, "type": 9, "label": 1 }, { "name": "swift_prefix", "number": 39, "type": 9, "label": 1 }, { "name": "php_class_prefix", "number": 40, "type": 9, "label": 1 }, { "name": "php_namespace", "number": 41, "type": 9, "label": 1 }, { "name": "php_metadata_namespace", "number": 44, "type": 9, "label": 1 }, { "name": "ruby_package", "number": 45, "type": 9, "label": 1 }, { "name": "features", "number": 50, "type": 11, "label": 1, "typeName": ".google.protobuf.FeatureSet" }, { "name": "uninterpreted_option", "number": 999, "type": 11, "label": 3, "typeName": ".google.protobuf.UninterpretedOption" }], "enumType": [{ "name": "OptimizeMode", "value": [{ "name": "SPEED", "number": 1 }, { "name": "CODE_SIZE", "number": 2 }, { "name": "LITE_RUNTIME", "number": 3 }] }], "extensionRange": [{ "start": 1e3, "end": 536870912 }] }, { "name": "MessageOptions", "field": [{ "name": "message_set_wire_format", "number": 1, "type": 8, "label": 1, "defaultValue": "false" }, { "name": "no_standard_descriptor_accessor", "number": 2, "type": 8, "label": 1, "defaultValue": "false" }, { "name": "deprecated", "number": 3, "type": 8, "label": 1, "defaultValue": "false" }, { "name": "map_entry", "number": 7, "type": 8, "label": 1 }, { "name": "deprecated_legacy_json_field_conflicts", "number": 11, "type": 8, "label": 1, "options": { "deprecated": true } }, { "name": "features", "number": 12, "type": 11, "label": 1, "typeName": ".google.protobuf.FeatureSet" }, { "name": "uninterpreted_option", "number": 999, "type": 11, "label": 3, "typeName": ".google.protobuf.UninterpretedOption" }], "extensionRange": [{ "start": 1e3, "end": 536870912 }] }, { "name": "FieldOptions", "field": [{ "name": "ctype", "number": 1, "type": 14, "label": 1, "typeName": ".google.protobuf.FieldOptions.CType", "defaultValue": "STRING" }, { "name": "packed", "number": 2, "type": 8, "label": 1 }, { "name": "jstype", "number": 6, "type": 14, "label": 1, "typeName": ".google.protobuf.FieldOptions.JSType", "defaultValue": "JS_NORMAL" }, { "name": "lazy", "number": 5, "type": 8, "label": 1, "defaultValue": "false" }, { "name": "unverified_lazy", "number": 15, "type": 8, "label": 1, "defaultValue": "false" }, { "name": "deprecated", "number": 3, "type": 8, "label": 1, "defaultValue": "false" }, { "name": "weak", "number": 10, "type": 8, "label": 1, "defaultValue": "false", "options": { "deprecated": true } }, { "name": "debug_redact", "number": 16, "type": 8, "label": 1, "defaultValue": "false" }, { "name": "retention", "number": 17, "type": 14, "label": 1, "typeName": ".google.protobuf.FieldOptions.OptionRetention" }, { "name": "targets", "number": 19, "type": 14, "label": 3, "typeName": ".google.protobuf.FieldOptions.OptionTargetType" }, { "name": "edition_defaults", "number": 20, "type": 11, "label": 3, "typeName": ".google.protobuf.FieldOptions.EditionDefault" }, { "name": "features", "number": 21, "type": 11, "label": 1, "typeName": ".google.protobuf.FeatureSet" }, { "name": "feature_support", "number": 22, "type": 11, "label": 1, "typeName": ".google.protobuf.FieldOptions.FeatureSupport" }, { "name": "uninterpreted_option", "number": 999, "type": 11, "label": 3, "typeName": ".google.protobuf.UninterpretedOption" }], "nestedType": [{ "name": "EditionDefault", "field": [{ "name": "edition", "number": 3, "type": 14, "label": 1, "typeName": ".google.protobuf.Edition" }, { "name": "value", "number": 2, "type": 9, "label": 1 }] }, { "name": "FeatureSupport", "field": [{ "name": "edition_introduced", "number": 1, "type": 14, "label": 1, "typeName": ".google.protobuf.Edition" }, { "name": "edition_deprecated", "number": 2, "type": 14, "label": 1, "typeName": ".google.protobuf.Edition" }, { "name": "deprecation_warning", "number": 3, "type": 9, "label": 1 }, { "name": "edition_removed", "number": 4, "type": 14, "label": 1, "typeName": ".google.protobuf.Edition" }, { "name": "removal_error", "number": 5, "type": 9, "label": 1 }] }], "enumType": [{ "name": "CType", "value": [{ "name": "STRING", "number": 0 }, { "name": "CORD", "number": 1 }, { "name": "STRING_PIECE", "number": 2 }] }, { "name": "JSType", "value": [{ "name": "JS_NORMAL", "number": 0 }, { "name": "JS_STRING", "number": 1 }, { "name": "JS_NUMBER", "number": 2 }] }, { "name": "OptionRetention", "value": [{ "name": "RETENTION_UNKNOWN", "number": 0 }, { "name": "RETENTION_RUNTIME", "number": 1 }, { "name": "RETENTION_SOURCE", "number": 2 }] }, { "name": "OptionTargetType", "value": [{ "name": "TARGET_TYPE_UNKNOWN", "number": 0 }, { "name": "TARGET_TYPE_FILE", "number": 1 }, { "name": "TARGET_TYPE_EXTENSION_RANGE", "number": 2 }, { "name": "TARGET_TYPE_MESSAGE", "number": 3 }, { "name": "TARGET_TYPE_FIELD", "number": 4 }, { "name": "TARGET_TYPE_ONEOF", "number": 5 }, { "name": "TARGET_TYPE_ENUM", "number": 6 }, { "name": "TARGET_TYPE_ENUM_ENTRY", "number": 7 }, { "name": "TARGET_TYPE_SERVICE", "number": 8 }, { "name": "TARGET_TYPE_METHOD", "number": 9 }] }], "extensionRange": [{ "start": 1e3, "end": 536870912 }] }, { "name": "OneofOptions", "field": [{ "name": "features", "number": 1, "type": 11, "label": 1, "typeName": ".google.protobuf.FeatureSet" }, { "name": "uninterpreted_option", "number": 999, "type": 11, "label": 3, "typeName": ".google.protobuf.UninterpretedOption" }], "extensionRange": [{ "start": 1e3, "end": 536870912 }] }, { "name": "EnumOptions", "field": [{ "name": "allow_alias", "number": 2, "type": 8, "label": 1 }, { "name": "deprecated", "number": 3, "type": 8, "label": 1, "defaultValue": "false" }, { "name": "deprecated_legacy_json_field_conflicts", "number": 6, "type": 8, "label": 1, "options": { "deprecated": true } }, { "name": "features", "number": 7, "type": 11, "label": 1, "typeName": ".google.protobuf.FeatureSet" }, { "name": "uninterpreted_option", "number": 999, "type": 11, "label": 3, "typeName": ".google.protobuf.UninterpretedOption" }], "extensionRange": [{ "start": 1e3, "end": 536870912 }] }, { "name": "EnumValueOptions", "field": [{ "name": "deprecated", "number": 1, "type": 8, "label": 1, "defaultValue": "false" }, { "name": "features", "number": 2, "type": 11, "label": 1, "typeName": ".google.protobuf.FeatureSet" }, { "name": "debug_redact", "number": 3, "type": 8, "label": 1, "defaultValue": "false" }, { "name": "feature_support", "number": 4, "type": 11, "label": 1, "typeName": ".google.protobuf.FieldOptions.FeatureSupport" }, { "name": "uninterpreted_option", "number": 999, "type": 11, "label": 3, "typeName": ".google.protobuf.UninterpretedOption" }], "extensionRange": [{ "start": 1e3, "end": 536870912 }] }, { "name": "ServiceOptions", "field": [{ "name": "features", "number": 34, "type": 11, "label": 1, "typeName": ".google.protobuf.FeatureSet" }, { "name": "deprecated", "number": 33, "type": 8, "label": 1, "defaultValue": "false" }, { "name": "uninterpreted_option", "number": 999, "type": 11, "label": 3, "typeName": ".google.protobuf.UninterpretedOption" }], "extensionRange": [{ "start": 1e3, "end": 536870912 }] }, { "name": "MethodOptions", "field": [{ "name": "deprecated", "number": 33, "type": 8, "label": 1, "defaultValue": "false" }, { "name": "idempotency_level", "number": 34, "type": 14, "label": 1, "typeName": ".google.protobuf.MethodOptions.IdempotencyLevel", "defaultValue": "IDEMPOTENCY_UNKNOWN" }, { "name": "features", "number": 35, "type": 11, "label": 1, "typeName": ".google.protobuf.FeatureSet" }, { "name": "uninterpreted_option", "number": 999, "type": 11, "label": 3, "typeName": ".google.protobuf.UninterpretedOption" }], "enumType": [{ "name": "IdempotencyLevel", "value": [{ "name": "IDEMPOTENCY_UNKNOWN", "number": 0 }, { "name": "NO_SIDE_EFFECTS", "number": 1 }, { "name": "IDEMPOTENT", "number": 2 }] }], "extensionRange": [{ "start": 1e3, "end": 536870912 }] }, { "name": "UninterpretedOption", "field": [{ "name": "name", "number": 2, "type": 11, "label": 3, "typeName": ".google.protobuf.UninterpretedOption.NamePart" }, { "name": "identifier_value", "number": 3, "type": 9, "label": 1 }, { "name": "positive_int_value", "number": 4, "type": 4, "label": 1 }, { "name": "negative_int_value", "number": 5, "type": 3, "label": 1 }, { "name": "double_value", "number": 6, "type": 1, "label": 1 }, { "name": "string_value", "number": 7, "type": 12, "label": 1 }, { "name": "aggregate_value", "number": 8, "type": 9, "label": 1 }], "nestedType": [{ "name": "NamePart", "field": [{ "name": "name_part", "number": 1, "type": 9, "label": 2 }, { "name": "is_extension", "number": 2, "type": 8, "label": 2 }] }] }, { "name": "FeatureSet", "field": [{ "name": "field_presence", "number": 1, "type": 14, "label": 1, "typeName": ".google.protobuf.FeatureSet.FieldPresence", "options": { "retention": 1, "targets": [4, 1], "editionDefaults": [{ "value": "EXPLICIT", "edition": 900 }, { "value": "IMPLICIT", "edition": 999 }, { "value": "EXPLICIT", "edition": 1e3 }] } }, { "name": "enum_type", "number": 2, "type": 14, "label": 1, "typeName": ".google.protobuf.FeatureSet.EnumType", "options": { "retention": 1, "targets": [6, 1], "editionDefaults": [{ "value": "CLOSED", "edition": 900 }, { "value": "OPEN", "edition": 999 }] } }, { "name": "repeated_field_encoding", "number": 3, "type": 14, "label": 1, "typeName": ".google.protobuf.FeatureSet.RepeatedFieldEncoding", "options": { "retention": 1, "targets": [4, 1], "editionDefaults": [{ "value": "EXPANDED", "edition": 900 }, { "value": "PACKED", "edition": 999 }] } }, { "name": "utf8_validation", "number": 4, "type": 14, "label": 1, "typeName": ".google.protobuf.FeatureSet.Utf8Validation", "options": { "retention": 1, "targets": [4, 1], "editionDefaults": [{ "value": "NONE", "edition": 900 }, { "value": "VERIFY", "edition": 999 }] } }, { "name": "message_encoding", "number": 5, "type": 14, "label": 1, "typeName": ".google.protobuf.FeatureSet.MessageEncoding", "options": { "retention": 1, "targets": [4, 1], "editionDefaults": [{ "value": "LENGTH_PREFIXED", "edition": 900 }] } }, { "name": "json_format", "number": 6, "type": 14, "label": 1, "typeName": ".google.protobuf.FeatureSet.JsonFormat", "options": { "retention": 1, "targets": [3, 6, 1], "editionDefaults": [{ "value": "LEGACY_BEST_EFFORT", "edition": 900 }, { "value": "ALLOW", "edition": 999 }] } }, { "name": "enforce_naming_style", "number": 7, "type": 14, "label": 1, "typeName": ".google.protobuf.FeatureSet.EnforceNamingStyle", "options": { "retention": 2, "targets": [1, 2, 3, 4, 5, 6, 7, 8, 9], "editionDefaults": [{ "value": "STYLE_LEGACY", "edition": 900 }, { "value": "STYLE2024", "edition": 1001 }] } }, { "name": "default_symbol_visibility", "number": 8, "type": 14, "label": 1, "typeName": ".google.protobuf.FeatureSet.VisibilityFeature.DefaultSymbolVisibility", "options": { "retention": 2, "targets": [1], "editionDefaults": [{ "value": "EXPORT_ALL", "edition": 900 }, { "value": "EXPORT_TOP_LEVEL", "edition": 1001 }] } }], "nestedType": [{ "name": "VisibilityFeature", "enumType": [{ "name": "DefaultSymbolVisibility", "value": [{ "name": "DEFAULT_SYMBOL_VISIBILITY_UNKNOWN", "number": 0 }, { "name": "EXPORT_ALL", "number": 1 }, { "name": "EXPORT_TOP_LEVEL", "number": 2 }, { "name": "LOCAL_ALL", "number": 3 }, { "name": "STRICT", "number": 4 }] }] }], "enumType": [{ "name": "FieldPresence", "value": [{ "name": "FIELD_PRESENCE_UNKNOWN", "number": 0 }, { "name": "EXPLICIT", "number": 1 }, { "name": "IMPLICIT", "number": 2 }, { "name": "LEGACY_REQUIRED", "number": 3 }] }, { "name": "EnumType", "value": [{ "name": "ENUM_TYPE_UNKNOWN", "number": 0 }, { "name": "OPEN", "number": 1 }, { "name": "CLOSED", "number": 2 }] }, { "name": "RepeatedFieldEncoding", "value": [{ "name": "REPEATED_FIELD_ENCODING_UNKNOWN", "number": 0 }, { "name": "PACKED", "number": 1 }, { "name": "EXPANDED", "number": 2 }] }, { "name": "Utf8Validation", "value": [{ "name": "UTF8_VALIDATION_UNKNOWN", "number": 0 }, { "name": "VERIFY", "number": 2 }, { "name": "NONE", "number": 3 }] }, { "name": "MessageEncoding", "value": [{ "name": "MESSAGE_ENCODING_UNKNOWN", "number": 0 }, { "name": "LENGTH_PREFIXED", "number": 1 }, { "name": "DELIMITED", "number": 2 }] }, { "name": "JsonFormat", "value": [{ "name": "JSON_FORMAT_UNKNOWN", "number": 0 }, { "name": "ALLOW", "number": 1 }, { "name": "LEGACY_BEST_EFFORT", "number": 2 }] }, { "name": "EnforceNamingStyle", "value": [{ "name": "ENFORCE_NAMING_STYLE_UNKNOWN", "number": 0 }, { "name": "STYLE2024", "number": 1 }, { "name": "STYLE_LEGACY", "number": 2 }] }], "extensionRange": [{ "start": 1e3, "end": 9995 }, { "start": 9995, "end": 1e4 }, { "start": 1e4, "end": 10001 }] }, { "name": "FeatureSetDefaults", "field": [{ "name": "defaults", "number": 1, "type": 11, "label": 3, "typeName": ".google.protobuf.FeatureSetDefaults.FeatureSetEditionDefault" }, { "name": "minimum_edition", "number": 4, "type": 14, "label": 1, "typeName": ".google.protobuf.Edition" }, { "name": "maximum_edition", "number": 5, "type": 14, "label": 1, "typeName": ".google.protobuf.Edition" }], "nestedType": [{ "name": "FeatureSetEditionDefault", "field": [{ "name": "edition", "number": 3, "type": 14, "label": 1, "typeName": ".google.protobuf.Edition" }, { "name": "overridable_features", "number": 4, "type": 11, "label": 1, "typeName": ".google.protobuf.FeatureSet" }, { "name": "fixed_features", "number": 5, "type": 11, "label": 1, "typeName": ".google.protobuf.FeatureSet" }] }] }, { "name": "SourceCodeInfo", "field": [{ "name": "location", "number": 1, "type": 11, "label": 3, "typeName": ".google.protobuf.SourceCodeInfo.Location" }], "nestedType": [{ "name": "Location", "field": [{ "name": "path", "number": 1, "type": 5, "label": 3, "options": { "packed": true } }, { "name": "span", "number": 2, "type": 5, "label": 3, "options": { "packed": true } }, { "name": "leading_comments", "number": 3, "type": 9, "label": 1 }, { "name": "trailing_comments", "number": 4, "type": 9, "label": 1 }, { "name": "leading_detached_comments", "number": 6, "type": 9, "label": 3 }] }], "extensionRange": [{ "start": 536e6, "end": 536000001 }] }, { "name": "GeneratedCodeInfo", "field": [{ "name": "annotation", "number": 1, "type": 11, "label": 3, "typeName": ".google.protobuf.GeneratedCodeInfo.Annotation" }], "nestedType": [{ "name": "Annotation", "field": [{ "name": "path", "number": 1, "type": 5, "label": 3, "options": { "packed": true } }, { "name": "source_file", "number": 2, "type": 9, "label": 1 }, { "name": "begin", "number": 3, "type": 5, "label": 1 }, { "name": "end", "number": 4, "type": 5, "label": 1 }, { "name": "semantic", "number": 5, "type": 14, "label": 1, "typeName": ".google.protobuf.GeneratedCodeInfo.Annotation.Semantic" }], "enumType": [{ "name": "Semantic", "value": [{ "name": "NONE", "number": 0 }, { "name": "SET", "number": 1 }, { "name": "ALIAS", "number": 2 }] }] }] }], "enumType": [{ "name": "Edition", "value": [{ "name": "EDITION_UNKNOWN", "number": 0 }, { "name": "EDITION_LEGACY", "number": 900 }, { "name": "EDITION_PROTO2", "number": 998 }, { "name": "EDITION_PROTO3", "number": 999 }, { "name": "EDITION_2023", "number": 1e3 }, { "name": "EDITION_2024", "number": 1001 }, { "name": "EDITION_UNSTABLE", "number": 9999 }, { "name": "EDITION_1_TEST_ONLY", "number": 1 }, { "name": "EDITION_2_TEST_ONLY", "number": 2 }, { "name": "EDITION_99997_TEST_ONLY", "number": 99997 }, { "name": "EDITION_99998_TEST_ONLY", "number": 99998 }, { "name": "EDITION_99999_TEST_ONLY", "number": 99999 }, { "name": "EDITION_MAX", "number": 2147483647 }] }, { "name": "SymbolVisibility", "value": [{ "name": "VISIBILITY_UNSET", "number": 0 }, { "name": "VISIBILITY_LOCAL", "number": 1 }, { "name": "VISIBILITY_EXPORT", "number": 2 }] }] });
var FileDescriptorProtoSchema = /* @__PURE__ */ messageDesc(file_google_protobuf_descriptor, 1);
var ExtensionRangeOptions_VerificationState;
(function(ExtensionRangeOptions_VerificationState2) {
  ExtensionRangeOptions_VerificationState2[ExtensionRangeOptions_VerificationState2["DECLARATION"] = 0] = "DECLARATION";
  ExtensionRangeOptions_VerificationState2[ExtensionRangeOptions_VerificationState2["UNVERIFIED"] = 1] = "UNVERIFIED";
})(ExtensionRangeOptions_VerificationState || (ExtensionRangeOptions_VerificationState = {}));
var FieldDescriptorProto_Type;
(function(FieldDescriptorProto_Type2) {
  FieldDescriptorProto_Type2[FieldDescriptorProto_Type2["DOUBLE"] = 1] = "DOUBLE";
  FieldDescriptorProto_Type2[FieldDescriptorProto_Type2["FLOAT"] = 2] = "FLOAT";
  FieldDescriptorProto_Type2[FieldDescriptorProto_Type2["INT64"] = 3] = "INT64";
  FieldDescriptorProto_Type2[FieldDescriptorProto_Type2["UINT64"] = 4] = "UINT64";
  FieldDescriptorProto_Type2[FieldDescriptorProto_Type2["INT32"] = 5] = "INT32";
  FieldDescriptorProto_Type2[FieldDescriptorProto_Type2["FIXED64"] = 6] = "FIXED64";
  FieldDescriptorProto_Type2[FieldDescriptorProto_Type2["FIXED32"] = 7] = "FIXED32";
  FieldDescriptorProto_Type2[FieldDescriptorProto_Type2["BOOL"] = 8] = "BOOL";
  FieldDescriptorProto_Type2[FieldDescriptorProto_Type2["STRING"] = 9] = "STRING";
  FieldDescriptorProto_Type2[FieldDescriptorProto_Type2["GROUP"] = 10] = "GROUP";
  FieldDescriptorProto_Type2[FieldDescriptorProto_Type2["MESSAGE"] = 11] = "MESSAGE";
  FieldDescriptorProto_Type2[FieldDescriptorProto_Type2["BYTES"] = 12] = "BYTES";
  FieldDescriptorProto_Type2[FieldDescriptorProto_Type2["UINT32"] = 13] = "UINT32";
  FieldDescriptorProto_Type2[FieldDescriptorProto_Type2["ENUM"] = 14] = "ENUM";
  FieldDescriptorProto_Type2[FieldDescriptorProto_Type2["SFIXED32"] = 15] = "SFIXED32";
  FieldDescriptorProto_Type2[FieldDescriptorProto_Type2["SFIXED64"] = 16] = "SFIXED64";
  FieldDescriptorProto_Type2[FieldDescriptorProto_Type2["SINT32"] = 17] = "SINT32";
  FieldDescriptorProto_Type2[FieldDescriptorProto_Type2["SINT64"] = 18] = "SINT64";
})(FieldDescriptorProto_Type || (FieldDescriptorProto_Type = {}));
var FieldDescriptorProto_Label;
(function(FieldDescriptorProto_Label2) {
  FieldDescriptorProto_Label2[FieldDescriptorProto_Label2["OPTIONAL"] = 1] = "OPTIONAL";
  FieldDescriptorProto_Label2[FieldDescriptorProto_Label2["REPEATED"] = 3] = "REPEATED";
  FieldDescriptorProto_Label2[FieldDescriptorProto_Label2["REQUIRED"] = 2] = "REQUIRED";
})(FieldDescriptorProto_Label || (FieldDescriptorProto_Label = {}));
var FileOptions_OptimizeMode;
(function(FileOptions_OptimizeMode2) {
  FileOptions_OptimizeMode2[FileOptions_OptimizeMode2["SPEED"] = 1] = "SPEED";
  FileOptions_OptimizeMode2[FileOptions_OptimizeMode2["CODE_SIZE"] = 2] = "CODE_SIZE";
  FileOptions_OptimizeMode2[FileOptions_OptimizeMode2["LITE_RUNTIME"] = 3] = "LITE_RUNTIME";
})(FileOptions_OptimizeMode || (FileOptions_OptimizeMode = {}));
var FieldOptions_CType;
(function(FieldOptions_CType2) {
  FieldOptions_CType2[FieldOptions_CType2["STRING"] = 0] = "STRING";
  FieldOptions_CType2[FieldOptions_CType2["CORD"] = 1] = "CORD";
  FieldOptions_CType2[FieldOptions_CType2["STRING_PIECE"] = 2] = "STRING_PIECE";
})(FieldOptions_CType || (FieldOptions_CType = {}));
var FieldOptions_JSType;
(function(FieldOptions_JSType2) {
  FieldOptions_JSType2[FieldOptions_JSType2["JS_NORMAL"] = 0] = "JS_NORMAL";
  FieldOptions_JSType2[FieldOptions_JSType2["JS_STRING"] = 1] = "JS_STRING";
  FieldOptions_JSType2[FieldOptions_JSType2["JS_NUMBER"] = 2] = "JS_NUMBER";
})(FieldOptions_JSType || (FieldOptions_JSType = {}));
var FieldOptions_OptionRetention;
(function(FieldOptions_OptionRetention2) {
  FieldOptions_OptionRetention2[FieldOptions_OptionRetention2["RETENTION_UNKNOWN"] = 0] = "RETENTION_UNKNOWN";
  FieldOptions_OptionRetention2[FieldOptions_OptionRetention2["RETENTION_RUNTIME"] = 1] = "RETENTION_RUNTIME";
  FieldOptions_OptionRetention2[FieldOptions_OptionRetention2["RETENTION_SOURCE"] = 2] = "RETENTION_SOURCE";
})(FieldOptions_OptionRetention || (FieldOptions_OptionRetention = {}));
var FieldOptions_OptionTargetType;
(function(FieldOptions_OptionTargetType2) {
  FieldOptions_OptionTargetType2[FieldOptions_OptionTargetType2["TARGET_TYPE_UNKNOWN"] = 0] = "TARGET_TYPE_UNKNOWN";
  FieldOptions_OptionTargetType2[FieldOptions_OptionTargetType2["TARGET_TYPE_FILE"] = 1] = "TARGET_TYPE_FILE";
  FieldOptions_OptionTargetType2[FieldOptions_OptionTargetType2["TARGET_TYPE_EXTENSION_RANGE"] = 2] = "TARGET_TYPE_EXTENSION_RANGE";
  FieldOptions_OptionTargetType2[FieldOptions_OptionTargetType2["TARGET_TYPE_MESSAGE"] = 3] = "TARGET_TYPE_MESSAGE";
  FieldOptions_OptionTargetType2[FieldOptions_OptionTargetType2["TARGET_TYPE_FIELD"] = 4] = "TARGET_TYPE_FIELD";
  FieldOptions_OptionTargetType2[FieldOptions_OptionTargetType2["TARGET_TYPE_ONEOF"] = 5] = "TARGET_TYPE_ONEOF";
  FieldOptions_OptionTargetType2[FieldOptions_OptionTargetType2["TARGET_TYPE_ENUM"] = 6] = "TARGET_TYPE_ENUM";
  FieldOptions_OptionTargetType2[FieldOptions_OptionTargetType2["TARGET_TYPE_ENUM_ENTRY"] = 7] = "TARGET_TYPE_ENUM_ENTRY";
  FieldOptions_OptionTargetType2[FieldOptions_OptionTargetType2["TARGET_TYPE_SERVICE"] = 8] = "TARGET_TYPE_SERVICE";
  FieldOptions_OptionTargetType2[FieldOptions_OptionTargetType2["TARGET_TYPE_METHOD"] = 9] = "TARGET_TYPE_METHOD";
})(FieldOptions_OptionTargetType || (FieldOptions_OptionTargetType = {}));
var MethodOptions_IdempotencyLevel;
(function(MethodOptions_IdempotencyLevel2) {
  MethodOptions_IdempotencyLevel2[MethodOptions_IdempotencyLevel2["IDEMPOTENCY_UNKNOWN"] = 0] = "IDEMPOTENCY_UNKNOWN";
  MethodOptions_IdempotencyLevel2[MethodOptions_IdempotencyLevel2["NO_SIDE_EFFECTS"] = 1] = "NO_SIDE_EFFECTS";
  MethodOptions_IdempotencyLevel2[MethodOptions_IdempotencyLevel2["IDEMPOTENT"] = 2] = "IDEMPOTENT";
})(MethodOptions_IdempotencyLevel || (MethodOptions_IdempotencyLevel = {}));
var FeatureSet_VisibilityFeature_DefaultSymbolVisibility;
(function(FeatureSet_VisibilityFeature_DefaultSymbolVisibility2) {
  FeatureSet_VisibilityFeature_DefaultSymbolVisibility2[FeatureSet_VisibilityFeature_DefaultSymbolVisibility2["DEFAULT_SYMBOL_VISIBILITY_UNKNOWN"] = 0] = "DEFAULT_SYMBOL_VISIBILITY_UNKNOWN";
  FeatureSet_VisibilityFeature_DefaultSymbolVisibility2[FeatureSet_VisibilityFeature_DefaultSymbolVisibility2["EXPORT_ALL"] = 1] = "EXPORT_ALL";
  FeatureSet_VisibilityFeature_DefaultSymbolVisibility2[FeatureSet_VisibilityFeature_DefaultSymbolVisibility2["EXPORT_TOP_LEVEL"] = 2] = "EXPORT_TOP_LEVEL";
  FeatureSet_VisibilityFeature_DefaultSymbolVisibility2[FeatureSet_VisibilityFeature_DefaultSymbolVisibility2["LOCAL_ALL"] = 3] = "LOCAL_ALL";
  FeatureSet_VisibilityFeature_DefaultSymbolVisibility2[FeatureSet_VisibilityFeature_DefaultSymbolVisibility2["STRICT"] = 4] = "STRICT";
})(FeatureSet_VisibilityFeature_DefaultSymbolVisibility || (FeatureSet_VisibilityFeature_DefaultSymbolVisibility = {}));
var FeatureSet_FieldPresence;
(function(FeatureSet_FieldPresence2) {
  FeatureSet_FieldPresence2[FeatureSet_FieldPresence2["FIELD_PRESENCE_UNKNOWN"] = 0] = "FIELD_PRESENCE_UNKNOWN";
  FeatureSet_FieldPresence2[FeatureSet_FieldPresence2["EXPLICIT"] = 1] = "EXPLICIT";
  FeatureSet_FieldPresence2[FeatureSet_FieldPresence2["IMPLICIT"] = 2] = "IMPLICIT";
  FeatureSet_FieldPresence2[FeatureSet_FieldPresence2["LEGACY_REQUIRED"] = 3] = "LEGACY_REQUIRED";
})(FeatureSet_FieldPresence || (FeatureSet_FieldPresence = {}));
var FeatureSet_EnumType;
(function(FeatureSet_EnumType2) {
  FeatureSet_EnumType2[FeatureSet_EnumType2["ENUM_TYPE_UNKNOWN"] = 0] = "ENUM_TYPE_UNKNOWN";
  FeatureSet_EnumType2[FeatureSet_EnumType2["OPEN"] = 1] = "OPEN";
  FeatureSet_EnumType2[FeatureSet_EnumType2["CLOSED"] = 2] = "CLOSED";
})(FeatureSet_EnumType || (FeatureSet_EnumType = {}));
var FeatureSet_RepeatedFieldEncoding;
(function(FeatureSet_RepeatedFieldEncoding2) {
  FeatureSet_RepeatedFieldEncoding2[FeatureSet_RepeatedFieldEncoding2["REPEATED_FIELD_ENCODING_UNKNOWN"] = 0] = "REPEATED_FIELD_ENCODING_UNKNOWN";
  FeatureSet_RepeatedFieldEncoding2[FeatureSet_RepeatedFieldEncoding2["PACKED"] = 1] = "PACKED";
  FeatureSet_RepeatedFieldEncoding2[FeatureSet_RepeatedFieldEncoding2["EXPANDED"] = 2] = "EXPANDED";
})(FeatureSet_RepeatedFieldEncoding || (FeatureSet_RepeatedFieldEncoding = {}));
var FeatureSet_Utf8Validation;
(function(FeatureSet_Utf8Validation2) {
  FeatureSet_Utf8Validation2[FeatureSet_Utf8Validation2["UTF8_VALIDATION_UNKNOWN"] = 0] = "UTF8_VALIDATION_UNKNOWN";
  FeatureSet_Utf8Validation2[FeatureSet_Utf8Validation2["VERIFY"] = 2] = "VERIFY";
  FeatureSet_Utf8Validation2[FeatureSet_Utf8Validation2["NONE"] = 3] = "NONE";
})(FeatureSet_Utf8Validation || (FeatureSet_Utf8Validation = {}));
var FeatureSet_MessageEncoding;
(function(FeatureSet_MessageEncoding2) {
  FeatureSet_MessageEncoding2[FeatureSet_MessageEncoding2["MESSAGE_ENCODING_UNKNOWN"] = 0] = "MESSAGE_ENCODING_UNKNOWN";
  FeatureSet_MessageEncoding2[FeatureSet_MessageEncoding2["LENGTH_PREFIXED"] = 1] = "LENGTH_PREFIXED";
  FeatureSet_MessageEncoding2[FeatureSet_MessageEncoding2["DELIMITED"] = 2] = "DELIMITED";
})(FeatureSet_MessageEncoding || (FeatureSet_MessageEncoding = {}));
var FeatureSet_JsonFormat;
(function(FeatureSet_JsonFormat2) {
  FeatureSet_JsonFormat2[FeatureSet_JsonFormat2["JSON_FORMAT_UNKNOWN"] = 0] = "JSON_FORMAT_UNKNOWN";
  FeatureSet_JsonFormat2[FeatureSet_JsonFormat2["ALLOW"] = 1] = "ALLOW";
  FeatureSet_JsonFormat2[FeatureSet_JsonFormat2["LEGACY_BEST_EFFORT"] = 2] = "LEGACY_BEST_EFFORT";
})(FeatureSet_JsonFormat || (FeatureSet_JsonFormat = {}));
var FeatureSet_EnforceNamingStyle;
(function(FeatureSet_EnforceNamingStyle2) {
  FeatureSet_EnforceNamingStyle2[FeatureSet_EnforceNamingStyle2["ENFORCE_NAMING_STYLE_UNKNOWN"] = 0] = "ENFORCE_NAMING_STYLE_UNKNOWN";
  FeatureSet_EnforceNamingStyle2[FeatureSet_EnforceNamingStyle2["STYLE2024"] = 1] = "STYLE2024";
  FeatureSet_EnforceNamingStyle2[FeatureSet_EnforceNamingStyle2["STYLE_LEGACY"] = 2] = "STYLE_LEGACY";
})(FeatureSet_EnforceNamingStyle || (FeatureSet_EnforceNamingStyle = {}));
var GeneratedCodeInfo_Annotation_Semantic;
(function(GeneratedCodeInfo_Annotation_Semantic2) {
  GeneratedCodeInfo_Annotation_Semantic2[GeneratedCodeInfo_Annotation_Semantic2["NONE"] = 0] = "NONE";
  GeneratedCodeInfo_Annotation_Semantic2[GeneratedCodeInfo_Annotation_Semantic2["SET"] = 1] = "SET";
  GeneratedCodeInfo_Annotation_Semantic2[GeneratedCodeInfo_Annotation_Semantic2["ALIAS"] = 2] = "ALIAS";
})(GeneratedCodeInfo_Annotation_Semantic || (GeneratedCodeInfo_Annotation_Semantic = {}));
var Edition;
(function(Edition2) {
  Edition2[Edition2["EDITION_UNKNOWN"] = 0] = "EDITION_UNKNOWN";
  Edition2[Edition2["EDITION_LEGACY"] = 900] = "EDITION_LEGACY";
  Edition2[Edition2["EDITION_PROTO2"] = 998] = "EDITION_PROTO2";
  Edition2[Edition2["EDITION_PROTO3"] = 999] = "EDITION_PROTO3";
  Edition2[Edition2["EDITION_2023"] = 1e3] = "EDITION_2023";
  Edition2[Edition2["EDITION_2024"] = 1001] = "EDITION_2024";
  Edition2[Edition2["EDITION_UNSTABLE"] = 9999] = "EDITION_UNSTABLE";
  Edition2[Edition2["EDITION_1_TEST_ONLY"] = 1] = "EDITION_1_TEST_ONLY";
  Edition2[Edition2["EDITION_2_TEST_ONLY"] = 2] = "EDITION_2_TEST_ONLY";
  Edition2[Edition2["EDITION_99997_TEST_ONLY"] = 99997] = "EDITION_99997_TEST_ONLY";
  Edition2[Edition2["EDITION_99998_TEST_ONLY"] = 99998] = "EDITION_99998_TEST_ONLY";
  Edition2[Edition2["EDITION_99999_TEST_ONLY"] = 99999] = "EDITION_99999_TEST_ONLY";
  Edition2[Edition2["EDITION_MAX"] = 2147483647] = "EDITION_MAX";
})(Edition || (Edition = {}));
var SymbolVisibility;
(function(SymbolVisibility2) {
  SymbolVisibility2[SymbolVisibility2["VISIBILITY_UNSET"] = 0] = "VISIBILITY_UNSET";
  SymbolVisibility2[SymbolVisibility2["VISIBILITY_LOCAL"] = 1] = "VISIBILITY_LOCAL";
  SymbolVisibility2[SymbolVisibility2["VISIBILITY_EXPORT"] = 2] = "VISIBILITY_EXPORT";
})(SymbolVisibility || (SymbolVisibility = {}));

// clients/typescript/node_modules/@bufbuild/protobuf/dist/esm/from-binary.js
function makeReadContext(options) {
  return Object.assign(Object.assign({ readUnknownFields: true, recursionLimit: 100 }, options), { depth: 0 });
}
function fromBinary(schema, bytes, options) {
  const msg = reflect(schema, void 0, false);
  readMessage(msg, new BinaryReader(bytes), makeReadContext(options), false, bytes.byteLength);
  return msg.message;
}
function readMessage(message, reader, ctx, delimited, lengthOrDelimitedFieldNo) {
  var _a;
  if (++ctx.depth > ctx.recursionLimit) {
    throw new Error(`cannot decode ${message.desc} from binary: maximum recursion depth of ${ctx.recursionLimit} reached`);
  }
  const end = delimited ? reader.len : reader.pos + lengthOrDelimitedFieldNo;
  let fieldNo;
  let wireType;
  const unknownFields = (_a = message.getUnknown()) !== null && _a !== void 0 ? _a : [];
  while (reader.pos < end) {
    [fieldNo, wireType] = reader.tag();
    if (delimited && wireType == WireType.EndGroup) {
      break;
    }
    const field2 = message.findNumber(fieldNo);
    if (!field2) {
      const recursionLimit = ctx.recursionLimit - ctx.depth;
      const data = reader.skip(wireType, fieldNo, recursionLimit);
      if (ctx.readUnknownFields) {
        unknownFields.push({ no: fieldNo, wireType, data });
      }
      continue;
    }
    readField(message, reader, field2, wireType, ctx);
  }
  if (delimited) {
    if (wireType != WireType.EndGroup || fieldNo !== lengthOrDelimitedFieldNo) {
      throw new Error("invalid end group tag");
    }
  }
  if (unknownFields.length > 0) {
    message.setUnknown(unknownFields);
  }
  ctx.depth--;
}
function readField(message, reader, field2, wireType, ctx) {
  var _a;
  switch (field2.fieldKind) {
    case "scalar":
      message.set(field2, readScalar(reader, field2.scalar, field2.utf8Validation));
      break;
    case "enum":
      const val = readScalar(reader, ScalarType.INT32);
      if (field2.enum.open) {
        message.set(field2, val);
      } else {
        const ok = field2.enum.values.some((v) => v.number === val);
        if (ok) {
          message.set(field2, val);
        } else if (ctx.readUnknownFields) {
          const bytes = [];
          varint32write(val, bytes);
          const unknownFields = (_a = message.getUnknown()) !== null && _a !== void 0 ? _a : [];
          unknownFields.push({
            no: field2.number,
            wireType,
            data: new Uint8Array(bytes)
          });
          message.setUnknown(unknownFields);
        }
      }
      break;
    case "message":
      message.set(field2, readMessageField(reader, ctx, field2, message.get(field2)));
      break;
    case "list":
      readListField(reader, wireType, message.get(field2), ctx);
      break;
    case "map":
      readMapEntry(reader, message.get(field2), ctx);
      break;
  }
}
function readMapEntry(reader, map, ctx) {
  const field2 = map.field();
  let key;
  let val;
  const len = reader.uint32();
  const end = reader.pos + len;
  while (reader.pos < end) {
    const [fieldNo] = reader.tag();
    switch (fieldNo) {
      case 1:
        key = readScalar(reader, field2.mapKey, field2.utf8Validation);
        break;
      case 2:
        switch (field2.mapKind) {
          case "scalar":
            val = readScalar(reader, field2.scalar, field2.utf8Validation);
            break;
          case "enum":
            val = reader.int32();
            break;
          case "message":
            val = readMessageField(reader, ctx, field2);
            break;
        }
        break;
    }
  }
  if (key === void 0) {
    key = scalarZeroValue(field2.mapKey, false);
  }
  if (val === void 0) {
    switch (field2.mapKind) {
      case "scalar":
        val = scalarZeroValue(field2.scalar, false);
        break;
      case "enum":
        val = field2.enum.values[0].number;
        break;
      case "message":
        val = reflect(field2.message, void 0, false);
        break;
    }
  }
  map.set(key, val);
}
function readListField(reader, wireType, list, ctx) {
  var _a;
  const field2 = list.field();
  if (field2.listKind === "message") {
    list.add(readMessageField(reader, ctx, field2));
    return;
  }
  const scalarType = (_a = field2.scalar) !== null && _a !== void 0 ? _a : ScalarType.INT32;
  const packed = wireType == WireType.LengthDelimited && scalarType != ScalarType.STRING && scalarType != ScalarType.BYTES;
  if (!packed) {
    list.add(readScalar(reader, scalarType, field2.utf8Validation));
    return;
  }
  const e = reader.uint32() + reader.pos;
  while (reader.pos < e) {
    list.add(readScalar(reader, scalarType, field2.utf8Validation));
  }
}
function readMessageField(reader, ctx, field2, mergeMessage) {
  const delimited = field2.delimitedEncoding;
  const message = mergeMessage !== null && mergeMessage !== void 0 ? mergeMessage : reflect(field2.message, void 0, false);
  readMessage(message, reader, ctx, delimited, delimited ? field2.number : reader.uint32());
  return message;
}
function readScalar(reader, type, validateUtf8 = false) {
  switch (type) {
    case ScalarType.STRING:
      return reader.string(validateUtf8);
    case ScalarType.BOOL:
      return reader.bool();
    case ScalarType.DOUBLE:
      return reader.double();
    case ScalarType.FLOAT:
      return reader.float();
    case ScalarType.INT32:
      return reader.int32();
    case ScalarType.INT64:
      return reader.int64();
    case ScalarType.UINT64:
      return reader.uint64();
    case ScalarType.FIXED64:
      return reader.fixed64();
    case ScalarType.BYTES:
      return reader.bytes();
    case ScalarType.FIXED32:
      return reader.fixed32();
    case ScalarType.SFIXED32:
      return reader.sfixed32();
    case ScalarType.SFIXED64:
      return reader.sfixed64();
    case ScalarType.SINT64:
      return reader.sint64();
    case ScalarType.UINT32:
      return reader.uint32();
    case ScalarType.SINT32:
      return reader.sint32();
  }
}

// clients/typescript/node_modules/@bufbuild/protobuf/dist/esm/codegenv2/file.js
function fileDesc(b64, imports) {
  var _a;
  const root = fromBinary(FileDescriptorProtoSchema, base64Decode(b64));
  root.messageType.forEach(restoreJsonNames);
  root.dependency = (_a = imports === null || imports === void 0 ? void 0 : imports.map((f) => f.proto.name)) !== null && _a !== void 0 ? _a : [];
  const reg = createFileRegistry(root, (protoFileName) => imports === null || imports === void 0 ? void 0 : imports.find((f) => f.proto.name === protoFileName));
  return reg.getFile(root.name);
}

// clients/typescript/node_modules/@bufbuild/protobuf/dist/esm/wkt/gen/google/protobuf/timestamp_pb.js
var file_google_protobuf_timestamp = /* @__PURE__ */ fileDesc("Ch9nb29nbGUvcHJvdG9idWYvdGltZXN0YW1wLnByb3RvEg9nb29nbGUucHJvdG9idWYiKwoJVGltZXN0YW1wEg8KB3NlY29uZHMYASABKAMSDQoFbmFub3MYAiABKAVChQEKE2NvbS5nb29nbGUucHJvdG9idWZCDlRpbWVzdGFtcFByb3RvUAFaMmdvb2dsZS5nb2xhbmcub3JnL3Byb3RvYnVmL3R5cGVzL2tub3duL3RpbWVzdGFtcHBi+AEBogIDR1BCqgIeR29vZ2xlLlByb3RvYnVmLldlbGxLbm93blR5cGVzYgZwcm90bzM");

// clients/typescript/node_modules/@bufbuild/protobuf/dist/esm/wkt/gen/google/protobuf/duration_pb.js
var file_google_protobuf_duration = /* @__PURE__ */ fileDesc("Ch5nb29nbGUvcHJvdG9idWYvZHVyYXRpb24ucHJvdG8SD2dvb2dsZS5wcm90b2J1ZiIqCghEdXJhdGlvbhIPCgdzZWNvbmRzGAEgASgDEg0KBW5hbm9zGAIgASgFQoMBChNjb20uZ29vZ2xlLnByb3RvYnVmQg1EdXJhdGlvblByb3RvUAFaMWdvb2dsZS5nb2xhbmcub3JnL3Byb3RvYnVmL3R5cGVzL2tub3duL2R1cmF0aW9ucGL4AQGiAgNHUEKqAh5Hb29nbGUuUHJvdG9idWYuV2VsbEtub3duVHlwZXNiBnByb3RvMw");

// clients/typescript/node_modules/@bufbuild/protobuf/dist/esm/wkt/gen/google/protobuf/any_pb.js
var file_google_protobuf_any = /* @__PURE__ */ fileDesc("Chlnb29nbGUvcHJvdG9idWYvYW55LnByb3RvEg9nb29nbGUucHJvdG9idWYiJgoDQW55EhAKCHR5cGVfdXJsGAEgASgJEg0KBXZhbHVlGAIgASgMQnYKE2NvbS5nb29nbGUucHJvdG9idWZCCEFueVByb3RvUAFaLGdvb2dsZS5nb2xhbmcub3JnL3Byb3RvYnVmL3R5cGVzL2tub3duL2FueXBiogIDR1BCqgIeR29vZ2xlLlByb3RvYnVmLldlbGxLbm93blR5cGVzYgZwcm90bzM");
var AnySchema = /* @__PURE__ */ messageDesc(file_google_protobuf_any, 0);

// clients/typescript/node_modules/@bufbuild/protobuf/dist/esm/to-binary.js
var LEGACY_REQUIRED2 = 3;
var writeDefaults = {
  writeUnknownFields: true
};
function makeWriteOptions(options) {
  return options ? Object.assign(Object.assign({}, writeDefaults), options) : writeDefaults;
}
function toBinary(schema, message, options) {
  return writeFields(new BinaryWriter(), makeWriteOptions(options), reflect(schema, message)).finish();
}
function writeFields(writer, opts, msg) {
  var _a;
  for (const f of msg.sortedFields) {
    if (!msg.isSet(f)) {
      if (f.presence == LEGACY_REQUIRED2) {
        throw new Error(`cannot encode ${f} to binary: required field not set`);
      }
      continue;
    }
    writeField(writer, opts, msg, f);
  }
  if (opts.writeUnknownFields) {
    for (const { no, wireType, data } of (_a = msg.getUnknown()) !== null && _a !== void 0 ? _a : []) {
      writer.tag(no, wireType).raw(data);
    }
  }
  return writer;
}
function writeField(writer, opts, msg, field2) {
  var _a;
  switch (field2.fieldKind) {
    case "scalar":
    case "enum":
      writeScalar(writer, msg.desc.typeName, field2.name, (_a = field2.scalar) !== null && _a !== void 0 ? _a : ScalarType.INT32, field2.number, msg.get(field2));
      break;
    case "list":
      writeListField(writer, opts, field2, msg.get(field2));
      break;
    case "message":
      writeMessageField(writer, opts, field2, msg.get(field2));
      break;
    case "map":
      for (const [key, val] of msg.get(field2)) {
        writeMapEntry(writer, opts, field2, key, val);
      }
      break;
  }
}
function writeScalar(writer, msgName, fieldName, scalarType, fieldNo, value) {
  writeScalarValue(writer.tag(fieldNo, writeTypeOfScalar(scalarType)), msgName, fieldName, scalarType, value);
}
function writeMessageField(writer, opts, field2, message) {
  if (field2.delimitedEncoding) {
    writeFields(writer.tag(field2.number, WireType.StartGroup), opts, message).tag(field2.number, WireType.EndGroup);
  } else {
    writeFields(writer.tag(field2.number, WireType.LengthDelimited).fork(), opts, message).join();
  }
}
function writeListField(writer, opts, field2, list) {
  var _a;
  if (field2.listKind == "message") {
    for (const item of list) {
      writeMessageField(writer, opts, field2, item);
    }
    return;
  }
  const scalarType = (_a = field2.scalar) !== null && _a !== void 0 ? _a : ScalarType.INT32;
  if (field2.packed) {
    if (!list.size) {
      return;
    }
    writer.tag(field2.number, WireType.LengthDelimited).fork();
    for (const item of list) {
      writeScalarValue(writer, field2.parent.typeName, field2.name, scalarType, item);
    }
    writer.join();
    return;
  }
  for (const item of list) {
    writeScalar(writer, field2.parent.typeName, field2.name, scalarType, field2.number, item);
  }
}
function writeMapEntry(writer, opts, field2, key, value) {
  var _a;
  writer.tag(field2.number, WireType.LengthDelimited).fork();
  writeScalar(writer, field2.parent.typeName, field2.name, field2.mapKey, 1, key);
  switch (field2.mapKind) {
    case "scalar":
    case "enum":
      writeScalar(writer, field2.parent.typeName, field2.name, (_a = field2.scalar) !== null && _a !== void 0 ? _a : ScalarType.INT32, 2, value);
      break;
    case "message":
      writeFields(writer.tag(2, WireType.LengthDelimited).fork(), opts, value).join();
      break;
  }
  writer.join();
}
function writeScalarValue(writer, msgName, fieldName, type, value) {
  try {
    switch (type) {
      case ScalarType.STRING:
        writer.string(value);
        break;
      case ScalarType.BOOL:
        writer.bool(value);
        break;
      case ScalarType.DOUBLE:
        writer.double(value);
        break;
      case ScalarType.FLOAT:
        writer.float(value);
        break;
      case ScalarType.INT32:
        writer.int32(value);
        break;
      case ScalarType.INT64:
        writer.int64(value);
        break;
      case ScalarType.UINT64:
        writer.uint64(value);
        break;
      case ScalarType.FIXED64:
        writer.fixed64(value);
        break;
      case ScalarType.BYTES:
        writer.bytes(value);
        break;
      case ScalarType.FIXED32:
        writer.fixed32(value);
        break;
      case ScalarType.SFIXED32:
        writer.sfixed32(value);
        break;
      case ScalarType.SFIXED64:
        writer.sfixed64(value);
        break;
      case ScalarType.SINT64:
        writer.sint64(value);
        break;
      case ScalarType.UINT32:
        writer.uint32(value);
        break;
      case ScalarType.SINT32:
        writer.sint32(value);
        break;
    }
  } catch (e) {
    if (e instanceof Error) {
      throw new Error(`cannot encode field ${msgName}.${fieldName} to binary: ${e.message}`);
    }
    throw e;
  }
}
function writeTypeOfScalar(type) {
  switch (type) {
    case ScalarType.BYTES:
    case ScalarType.STRING:
      return WireType.LengthDelimited;
    case ScalarType.DOUBLE:
    case ScalarType.FIXED64:
    case ScalarType.SFIXED64:
      return WireType.Bit64;
    case ScalarType.FIXED32:
    case ScalarType.SFIXED32:
    case ScalarType.FLOAT:
      return WireType.Bit32;
    default:
      return WireType.Varint;
  }
}

// clients/typescript/node_modules/@bufbuild/protobuf/dist/esm/wkt/any.js
function anyPack(schema, message, into) {
  let ret = false;
  if (!into) {
    into = create(AnySchema);
    ret = true;
  }
  into.value = toBinary(schema, message);
  into.typeUrl = typeNameToUrl(message.$typeName);
  return ret ? into : void 0;
}
function anyIs(any, descOrTypeName) {
  if (any.typeUrl === "") {
    return false;
  }
  const want = typeof descOrTypeName == "string" ? descOrTypeName : descOrTypeName.typeName;
  const got = typeUrlToName(any.typeUrl);
  return want === got;
}
function anyUnpack(any, registryOrMessageDesc) {
  if (any.typeUrl === "") {
    return void 0;
  }
  const desc = registryOrMessageDesc.kind == "message" ? registryOrMessageDesc : registryOrMessageDesc.getMessage(typeUrlToName(any.typeUrl));
  if (!desc || !anyIs(any, desc)) {
    return void 0;
  }
  return fromBinary(desc, any.value);
}
function typeNameToUrl(name) {
  return `type.googleapis.com/${name}`;
}
function typeUrlToName(url) {
  const slash = url.lastIndexOf("/");
  const name = slash >= 0 ? url.substring(slash + 1) : url;
  if (!name.length) {
    throw new Error(`invalid type url: ${url}`);
  }
  return name;
}

// clients/typescript/node_modules/@bufbuild/protobuf/dist/esm/wkt/gen/google/protobuf/struct_pb.js
var file_google_protobuf_struct = /* @__PURE__ */ fileDesc("Chxnb29nbGUvcHJvdG9idWYvc3RydWN0LnByb3RvEg9nb29nbGUucHJvdG9idWYihAEKBlN0cnVjdBIzCgZmaWVsZHMYASADKAsyIy5nb29nbGUucHJvdG9idWYuU3RydWN0LkZpZWxkc0VudHJ5GkUKC0ZpZWxkc0VudHJ5EgsKA2tleRgBIAEoCRIlCgV2YWx1ZRgCIAEoCzIWLmdvb2dsZS5wcm90b2J1Zi5WYWx1ZToCOAEi6gEKBVZhbHVlEjAKCm51bGxfdmFsdWUYASABKA4yGi5nb29nbGUucHJvdG9idWYuTnVsbFZhbHVlSAASFgoMbnVtYmVyX3ZhbHVlGAIgASgBSAASFgoMc3RyaW5nX3ZhbHVlGAMgASgJSAASFAoKYm9vbF92YWx1ZRgEIAEoCEgAEi8KDHN0cnVjdF92YWx1ZRgFIAEoCzIXLmdvb2dsZS5wcm90b2J1Zi5TdHJ1Y3RIABIwCgpsaXN0X3ZhbHVlGAYgASgLMhouZ29vZ2xlLnByb3RvYnVmLkxpc3RWYWx1ZUgAQgYKBGtpbmQiMwoJTGlzdFZhbHVlEiYKBnZhbHVlcxgBIAMoCzIWLmdvb2dsZS5wcm90b2J1Zi5WYWx1ZSobCglOdWxsVmFsdWUSDgoKTlVMTF9WQUxVRRAAQn8KE2NvbS5nb29nbGUucHJvdG9idWZCC1N0cnVjdFByb3RvUAFaL2dvb2dsZS5nb2xhbmcub3JnL3Byb3RvYnVmL3R5cGVzL2tub3duL3N0cnVjdHBi+AEBogIDR1BCqgIeR29vZ2xlLlByb3RvYnVmLldlbGxLbm93blR5cGVzYgZwcm90bzM");
var StructSchema = /* @__PURE__ */ messageDesc(file_google_protobuf_struct, 0);
var ValueSchema = /* @__PURE__ */ messageDesc(file_google_protobuf_struct, 1);
var ListValueSchema = /* @__PURE__ */ messageDesc(file_google_protobuf_struct, 2);
var NullValue;
(function(NullValue2) {
  NullValue2[NullValue2["NULL_VALUE"] = 0] = "NULL_VALUE";
})(NullValue || (NullValue = {}));

// clients/typescript/node_modules/@bufbuild/protobuf/dist/esm/extensions.js
function getExtension(message, extension, options) {
  assertExtendee(extension, message);
  const ufs = filterUnknownFields(message.$unknown, extension);
  const [container, field2, get] = createExtensionContainer(extension);
  const ctx = makeReadContext(options);
  for (const uf of ufs) {
    readField(container, new BinaryReader(uf.data), field2, uf.wireType, ctx);
  }
  return get();
}
function setExtension(message, extension, value) {
  var _a;
  assertExtendee(extension, message);
  const ufs = ((_a = message.$unknown) !== null && _a !== void 0 ? _a : []).filter((uf) => uf.no !== extension.number);
  const [container, field2] = createExtensionContainer(extension, value);
  const writer = new BinaryWriter();
  writeField(writer, { writeUnknownFields: true }, container, field2);
  const reader = new BinaryReader(writer.finish());
  while (reader.pos < reader.len) {
    const [no, wireType] = reader.tag();
    const data = reader.skip(wireType, no);
    ufs.push({ no, wireType, data });
  }
  message.$unknown = ufs;
}
function filterUnknownFields(unknownFields, extension) {
  if (unknownFields === void 0)
    return [];
  if (extension.fieldKind === "enum" || extension.fieldKind === "scalar") {
    for (let i = unknownFields.length - 1; i >= 0; --i) {
      if (unknownFields[i].no == extension.number) {
        return [unknownFields[i]];
      }
    }
    return [];
  }
  return unknownFields.filter((uf) => uf.no === extension.number);
}
function createExtensionContainer(extension, value) {
  const localName = extension.typeName;
  const field2 = Object.assign(Object.assign({}, extension), { kind: "field", parent: extension.extendee, localName });
  const desc = Object.assign(Object.assign({}, extension.extendee), { fields: [field2], members: [field2], oneofs: [] });
  const container = create(desc, value !== void 0 ? { [localName]: value } : void 0);
  return [
    reflect(desc, container),
    field2,
    () => {
      const value2 = container[localName];
      if (value2 === void 0) {
        const desc2 = extension.message;
        if (isWrapperDesc(desc2)) {
          return scalarZeroValue(desc2.fields[0].scalar, desc2.fields[0].longAsString);
        }
        return create(desc2);
      }
      return value2;
    }
  ];
}
function assertExtendee(extension, message) {
  if (extension.extendee.typeName != message.$typeName) {
    throw new Error(`extension ${extension.typeName} can only be applied to message ${extension.extendee.typeName}`);
  }
}

// clients/typescript/node_modules/@bufbuild/protobuf/dist/esm/to-json.js
var LEGACY_REQUIRED3 = 3;
var IMPLICIT4 = 2;
var jsonWriteDefaults = {
  alwaysEmitImplicit: false,
  enumAsInteger: false,
  useProtoFieldName: false
};
function makeWriteOptions2(options) {
  return options ? Object.assign(Object.assign({}, jsonWriteDefaults), options) : jsonWriteDefaults;
}
function toJson(schema, message, options) {
  return reflectToJson(reflect(schema, message), makeWriteOptions2(options));
}
function toJsonString(schema, message, options) {
  var _a;
  const jsonValue = toJson(schema, message, options);
  return JSON.stringify(jsonValue, null, (_a = options === null || options === void 0 ? void 0 : options.prettySpaces) !== null && _a !== void 0 ? _a : 0);
}
function reflectToJson(msg, opts) {
  var _a;
  const wktJson = tryWktToJson(msg, opts);
  if (wktJson !== void 0)
    return wktJson;
  const json = {};
  for (const f of msg.sortedFields) {
    if (!msg.isSet(f)) {
      if (f.presence == LEGACY_REQUIRED3) {
        throw new Error(`cannot encode ${f} to JSON: required field not set`);
      }
      if (!opts.alwaysEmitImplicit || f.presence !== IMPLICIT4) {
        continue;
      }
    }
    const jsonValue = fieldToJson(f, msg.get(f), opts);
    if (jsonValue !== void 0) {
      json[jsonName(f, opts)] = jsonValue;
    }
  }
  if (opts.registry) {
    const tagSeen = /* @__PURE__ */ new Set();
    for (const { no } of (_a = msg.getUnknown()) !== null && _a !== void 0 ? _a : []) {
      if (!tagSeen.has(no)) {
        tagSeen.add(no);
        const extension = opts.registry.getExtensionFor(msg.desc, no);
        if (!extension) {
          continue;
        }
        const value = getExtension(msg.message, extension);
        const [container, field2] = createExtensionContainer(extension, value);
        const jsonValue = fieldToJson(field2, container.get(field2), opts);
        if (jsonValue !== void 0) {
          json[extension.jsonName] = jsonValue;
        }
      }
    }
  }
  return json;
}
function fieldToJson(f, val, opts) {
  switch (f.fieldKind) {
    case "scalar":
      return scalarToJson(f, val);
    case "message":
      return reflectToJson(val, opts);
    case "enum":
      return enumToJsonInternal(f.enum, val, opts.enumAsInteger);
    case "list":
      return listToJson(val, opts);
    case "map":
      return mapToJson(val, opts);
  }
}
function mapToJson(map, opts) {
  const f = map.field();
  const jsonObj = {};
  switch (f.mapKind) {
    case "scalar":
      for (const [entryKey, entryValue] of map) {
        jsonObj[entryKey] = scalarToJson(f, entryValue);
      }
      break;
    case "message":
      for (const [entryKey, entryValue] of map) {
        jsonObj[entryKey] = reflectToJson(entryValue, opts);
      }
      break;
    case "enum":
      for (const [entryKey, entryValue] of map) {
        jsonObj[entryKey] = enumToJsonInternal(f.enum, entryValue, opts.enumAsInteger);
      }
      break;
  }
  return opts.alwaysEmitImplicit || map.size > 0 ? jsonObj : void 0;
}
function listToJson(list, opts) {
  const f = list.field();
  const jsonArr = [];
  switch (f.listKind) {
    case "scalar":
      for (const item of list) {
        jsonArr.push(scalarToJson(f, item));
      }
      break;
    case "enum":
      for (const item of list) {
        jsonArr.push(enumToJsonInternal(f.enum, item, opts.enumAsInteger));
      }
      break;
    case "message":
      for (const item of list) {
        jsonArr.push(reflectToJson(item, opts));
      }
      break;
  }
  return opts.alwaysEmitImplicit || jsonArr.length > 0 ? jsonArr : void 0;
}
function enumToJsonInternal(desc, value, enumAsInteger) {
  var _a;
  if (typeof value != "number") {
    throw new Error(`cannot encode ${desc} to JSON: expected number, got ${formatVal(value)}`);
  }
  if (desc.typeName == "google.protobuf.NullValue") {
    return null;
  }
  if (enumAsInteger) {
    return value;
  }
  const val = desc.value[value];
  return (_a = val === null || val === void 0 ? void 0 : val.name) !== null && _a !== void 0 ? _a : value;
}
function scalarToJson(field2, value) {
  var _a, _b, _c, _d, _e, _f;
  switch (field2.scalar) {
    // int32, fixed32, uint32: JSON value will be a decimal number. Either numbers or strings are accepted.
    case ScalarType.INT32:
    case ScalarType.SFIXED32:
    case ScalarType.SINT32:
    case ScalarType.FIXED32:
    case ScalarType.UINT32:
      if (typeof value != "number") {
        throw new Error(`cannot encode ${field2} to JSON: ${(_a = checkField(field2, value)) === null || _a === void 0 ? void 0 : _a.message}`);
      }
      return value;
    // float, double: JSON value will be a number or one of the special string values "NaN", "Infinity", and "-Infinity".
    // Either numbers or strings are accepted. Exponent notation is also accepted.
    case ScalarType.FLOAT:
    case ScalarType.DOUBLE:
      if (typeof value != "number") {
        throw new Error(`cannot encode ${field2} to JSON: ${(_b = checkField(field2, value)) === null || _b === void 0 ? void 0 : _b.message}`);
      }
      if (Number.isNaN(value))
        return "NaN";
      if (value === Number.POSITIVE_INFINITY)
        return "Infinity";
      if (value === Number.NEGATIVE_INFINITY)
        return "-Infinity";
      return value;
    // string:
    case ScalarType.STRING:
      if (typeof value != "string") {
        throw new Error(`cannot encode ${field2} to JSON: ${(_c = checkField(field2, value)) === null || _c === void 0 ? void 0 : _c.message}`);
      }
      return value;
    // bool:
    case ScalarType.BOOL:
      if (typeof value != "boolean") {
        throw new Error(`cannot encode ${field2} to JSON: ${(_d = checkField(field2, value)) === null || _d === void 0 ? void 0 : _d.message}`);
      }
      return value;
    // JSON value will be a decimal string. Either numbers or strings are accepted.
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
    case ScalarType.INT64:
    case ScalarType.SFIXED64:
    case ScalarType.SINT64:
      if (typeof value == "bigint" || typeof value == "string" || typeof value == "number" && Number.isInteger(value)) {
        return value.toString();
      }
      throw new Error(`cannot encode ${field2} to JSON: ${(_e = checkField(field2, value)) === null || _e === void 0 ? void 0 : _e.message}`);
    // bytes: JSON value will be the data encoded as a string using standard base64 encoding with paddings.
    // Either standard or URL-safe base64 encoding with/without paddings are accepted.
    case ScalarType.BYTES:
      if (value instanceof Uint8Array) {
        return base64Encode(value);
      }
      throw new Error(`cannot encode ${field2} to JSON: ${(_f = checkField(field2, value)) === null || _f === void 0 ? void 0 : _f.message}`);
  }
}
function jsonName(f, opts) {
  return opts.useProtoFieldName ? f.name : f.jsonName;
}
function tryWktToJson(msg, opts) {
  if (!msg.desc.typeName.startsWith("google.protobuf.")) {
    return void 0;
  }
  switch (msg.desc.typeName) {
    case "google.protobuf.Any":
      return anyToJson(msg.message, opts);
    case "google.protobuf.Timestamp":
      return timestampToJson(msg.message);
    case "google.protobuf.Duration":
      return durationToJson(msg.message);
    case "google.protobuf.FieldMask":
      return fieldMaskToJson(msg.message);
    case "google.protobuf.Struct":
      return structToJson(msg.message);
    case "google.protobuf.Value":
      return valueToJson(msg.message);
    case "google.protobuf.ListValue":
      return listValueToJson(msg.message);
    default:
      if (isWrapperDesc(msg.desc)) {
        const valueField = msg.desc.fields[0];
        return scalarToJson(valueField, msg.get(valueField));
      }
      return void 0;
  }
}
function anyToJson(val, opts) {
  if (val.typeUrl === "") {
    return {};
  }
  const { registry } = opts;
  let message;
  let desc;
  if (registry) {
    message = anyUnpack(val, registry);
    if (message) {
      desc = registry.getMessage(message.$typeName);
    }
  }
  if (!desc || !message) {
    throw new Error(`cannot encode message ${val.$typeName} to JSON: "${val.typeUrl}" is not in the type registry`);
  }
  const reflected = reflect(desc, message);
  const json = hasCustomJsonRepresentation(desc) ? { value: tryWktToJson(reflected, opts) } : reflectToJson(reflected, opts);
  json["@type"] = val.typeUrl;
  return json;
}
function durationToJson(val) {
  const seconds = Number(val.seconds);
  const nanos = val.nanos;
  if (seconds > 315576e6 || seconds < -315576e6) {
    throw new Error(`cannot encode message ${val.$typeName} to JSON: value out of range`);
  }
  if (seconds > 0 && nanos < 0 || seconds < 0 && nanos > 0) {
    throw new Error(`cannot encode message ${val.$typeName} to JSON: nanos sign must match seconds sign`);
  }
  let text = val.seconds.toString();
  if (nanos !== 0) {
    let nanosStr = Math.abs(nanos).toString();
    nanosStr = "0".repeat(9 - nanosStr.length) + nanosStr;
    if (nanosStr.substring(3) === "000000") {
      nanosStr = nanosStr.substring(0, 3);
    } else if (nanosStr.substring(6) === "000") {
      nanosStr = nanosStr.substring(0, 6);
    }
    text += "." + nanosStr;
    if (nanos < 0 && seconds == 0) {
      text = "-" + text;
    }
  }
  return text + "s";
}
function fieldMaskToJson(val) {
  return val.paths.map((p) => {
    if (protoSnakeCase(protoCamelCase(p)) !== p) {
      throw new Error(`cannot encode message ${val.$typeName} to JSON: lowerCamelCase of path name "${p}" is irreversible`);
    }
    return protoCamelCase(p);
  }).join(",");
}
function structToJson(val) {
  const json = {};
  for (const [k, v] of Object.entries(val.fields)) {
    json[k] = valueToJson(v);
  }
  return json;
}
function valueToJson(val) {
  switch (val.kind.case) {
    case "nullValue":
      return null;
    case "numberValue":
      if (!Number.isFinite(val.kind.value)) {
        throw new Error(`${val.$typeName} cannot be NaN or Infinity`);
      }
      return val.kind.value;
    case "boolValue":
      return val.kind.value;
    case "stringValue":
      return val.kind.value;
    case "structValue":
      return structToJson(val.kind.value);
    case "listValue":
      return listValueToJson(val.kind.value);
    default:
      throw new Error(`${val.$typeName} must have a value`);
  }
}
function listValueToJson(val) {
  return val.values.map(valueToJson);
}
function timestampToJson(val) {
  const ms = Number(val.seconds) * 1e3;
  if (ms < Date.parse("0001-01-01T00:00:00Z") || ms > Date.parse("9999-12-31T23:59:59Z")) {
    throw new Error(`cannot encode message ${val.$typeName} to JSON: must be from 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z inclusive`);
  }
  if (val.nanos < 0) {
    throw new Error(`cannot encode message ${val.$typeName} to JSON: nanos must not be negative`);
  }
  if (val.nanos > 999999999) {
    throw new Error(`cannot encode message ${val.$typeName} to JSON: nanos must not be greater than 99999999`);
  }
  let z = "Z";
  if (val.nanos > 0) {
    const nanosStr = (val.nanos + 1e9).toString().substring(1);
    if (nanosStr.substring(3) === "000000") {
      z = "." + nanosStr.substring(0, 3) + "Z";
    } else if (nanosStr.substring(6) === "000") {
      z = "." + nanosStr.substring(0, 6) + "Z";
    } else {
      z = "." + nanosStr + "Z";
    }
  }
  return new Date(ms).toISOString().replace(".000Z", z);
}

// clients/typescript/node_modules/@bufbuild/protobuf/dist/esm/from-json.js
function makeReadContext2(options) {
  return Object.assign(Object.assign({ ignoreUnknownFields: false, recursionLimit: 100 }, options), { depth: 0 });
}
function fromJsonString(schema, json, options) {
  return fromJson(schema, parseJsonString(json, schema.typeName), options);
}
function fromJson(schema, json, options) {
  const msg = reflect(schema);
  try {
    readMessage2(msg, json, makeReadContext2(options));
  } catch (e) {
    if (isFieldError(e)) {
      throw new Error(`cannot decode ${e.field()} from JSON: ${e.message}`, {
        cause: e
      });
    }
    throw e;
  }
  return msg.message;
}
var messageJsonFields = /* @__PURE__ */ new WeakMap();
function getJsonField(desc, jsonKey) {
  var _a;
  if (!messageJsonFields.has(desc)) {
    const jsonNames = /* @__PURE__ */ new Map();
    for (const field2 of desc.fields) {
      jsonNames.set(field2.name, field2).set(field2.jsonName, field2);
    }
    messageJsonFields.set(desc, jsonNames);
  }
  return (_a = messageJsonFields.get(desc)) === null || _a === void 0 ? void 0 : _a.get(jsonKey);
}
function readMessage2(msg, json, ctx) {
  var _a;
  if (++ctx.depth > ctx.recursionLimit) {
    throw new Error(`cannot decode ${msg.desc} from JSON: maximum recursion depth of ${ctx.recursionLimit} reached`);
  }
  if (tryWktFromJson(msg, json, ctx)) {
    ctx.depth--;
    return;
  }
  if (json == null || Array.isArray(json) || typeof json != "object") {
    throw new Error(`cannot decode ${msg.desc} from JSON: ${formatVal(json)}`);
  }
  const oneofSeen = /* @__PURE__ */ new Map();
  const fieldSeen = /* @__PURE__ */ new Set();
  for (const [jsonKey, jsonValue] of Object.entries(json)) {
    const field2 = getJsonField(msg.desc, jsonKey);
    if (field2) {
      if (fieldSeen.has(field2)) {
        throw new FieldError(field2, "set multiple times");
      }
      fieldSeen.add(field2);
      if (field2.oneof && jsonValue === null && field2.fieldKind == "scalar") {
        continue;
      }
      if (field2.oneof) {
        const seen = oneofSeen.get(field2.oneof);
        if (seen !== void 0) {
          throw new FieldError(field2.oneof, `oneof set multiple times by ${seen.name} and ${field2.name}`);
        }
        oneofSeen.set(field2.oneof, field2);
      }
      readField2(msg, field2, jsonValue, ctx);
    } else {
      let extension = void 0;
      if (jsonKey.startsWith("[") && jsonKey.endsWith("]") && // biome-ignore lint/suspicious/noAssignInExpressions: no
      (extension = (_a = ctx.registry) === null || _a === void 0 ? void 0 : _a.getExtension(jsonKey.substring(1, jsonKey.length - 1))) && extension.extendee.typeName === msg.desc.typeName) {
        const [container, field3, get] = createExtensionContainer(extension);
        readField2(container, field3, jsonValue, ctx);
        setExtension(msg.message, extension, get());
      }
      if (!extension && !ctx.ignoreUnknownFields) {
        throw new Error(`cannot decode ${msg.desc} from JSON: key "${jsonKey}" is unknown`);
      }
    }
  }
  ctx.depth--;
}
function readField2(msg, field2, json, ctx) {
  switch (field2.fieldKind) {
    case "scalar":
      readScalarField(msg, field2, json);
      break;
    case "enum":
      readEnumField(msg, field2, json, ctx);
      break;
    case "message":
      readMessageField2(msg, field2, json, ctx);
      break;
    case "list":
      readListField2(msg.get(field2), json, ctx);
      break;
    case "map":
      readMapField(msg.get(field2), json, ctx);
      break;
  }
}
function readListOrMapItem(field2, json, ctx) {
  if (field2.scalar && json !== null) {
    return scalarFromJson(field2, json);
  }
  if (field2.message && !isResetSentinelNullValue(field2, json)) {
    const msgValue = reflect(field2.message);
    readMessage2(msgValue, json, ctx);
    return msgValue;
  }
  if (field2.enum && !isResetSentinelNullValue(field2, json)) {
    return readEnum(field2.enum, json, ctx.ignoreUnknownFields);
  }
  throw new FieldError(field2, `${field2.fieldKind === "list" ? "list item" : "map value"} must not be null`);
}
function readMapField(map, json, ctx) {
  if (json === null) {
    return;
  }
  const field2 = map.field();
  if (typeof json != "object" || Array.isArray(json)) {
    throw new FieldError(field2, "expected object, got " + formatVal(json));
  }
  const seen = /* @__PURE__ */ new Set();
  for (const [jsonMapKey, jsonMapValue] of Object.entries(json)) {
    const key = mapKeyFromJson(field2.mapKey, jsonMapKey);
    if (seen.has(key)) {
      throw new FieldError(field2, `duplicate map key "${jsonMapKey}"`);
    }
    seen.add(key);
    const value = readListOrMapItem(field2, jsonMapValue, ctx);
    if (value !== tokenIgnoredUnknownEnum) {
      map.set(key, value);
    }
  }
}
function readListField2(list, json, ctx) {
  if (json === null) {
    return;
  }
  const field2 = list.field();
  if (!Array.isArray(json)) {
    throw new FieldError(field2, "expected Array, got " + formatVal(json));
  }
  for (const jsonItem of json) {
    const value = readListOrMapItem(field2, jsonItem, ctx);
    if (value !== tokenIgnoredUnknownEnum) {
      list.add(value);
    }
  }
}
function readMessageField2(msg, field2, json, ctx) {
  if (isResetSentinelNullValue(field2, json)) {
    msg.clear(field2);
    return;
  }
  const msgValue = msg.isSet(field2) ? msg.get(field2) : reflect(field2.message);
  readMessage2(msgValue, json, ctx);
  msg.set(field2, msgValue);
}
function readEnumField(msg, field2, json, ctx) {
  if (isResetSentinelNullValue(field2, json)) {
    msg.clear(field2);
    return;
  }
  const enumValue = readEnum(field2.enum, json, ctx.ignoreUnknownFields);
  if (enumValue !== tokenIgnoredUnknownEnum) {
    msg.set(field2, enumValue);
  }
}
function readScalarField(msg, field2, json) {
  if (json === null) {
    msg.clear(field2);
  } else {
    msg.set(field2, scalarFromJson(field2, json));
  }
}
function isResetSentinelNullValue(field2, json) {
  var _a, _b;
  return json === null && ((_a = field2.message) === null || _a === void 0 ? void 0 : _a.typeName) != "google.protobuf.Value" && ((_b = field2.enum) === null || _b === void 0 ? void 0 : _b.typeName) != "google.protobuf.NullValue";
}
var tokenIgnoredUnknownEnum = /* @__PURE__ */ Symbol();
function readEnum(desc, json, ignoreUnknownFields) {
  if (json === null) {
    return desc.values[0].number;
  }
  switch (typeof json) {
    case "number":
      if (Number.isInteger(json)) {
        return json;
      }
      break;
    case "string":
      const value = desc.values.find((ev) => ev.name === json);
      if (value !== void 0) {
        return value.number;
      }
      if (ignoreUnknownFields) {
        return tokenIgnoredUnknownEnum;
      }
      break;
  }
  throw new Error(`cannot decode ${desc} from JSON: ${formatVal(json)}`);
}
function scalarFromJson(field2, json) {
  switch (field2.scalar) {
    // float, double: JSON value will be a number or one of the special string values "NaN", "Infinity", and "-Infinity".
    // Either numbers or strings are accepted. Exponent notation is also accepted.
    case ScalarType.DOUBLE:
    case ScalarType.FLOAT:
      if (json === "NaN")
        return NaN;
      if (json === "Infinity")
        return Number.POSITIVE_INFINITY;
      if (json === "-Infinity")
        return Number.NEGATIVE_INFINITY;
      if (typeof json == "number") {
        if (Number.isNaN(json)) {
          throw new FieldError(field2, "unexpected NaN number");
        }
        if (!Number.isFinite(json)) {
          throw new FieldError(field2, "unexpected infinite number");
        }
        break;
      }
      if (typeof json == "string") {
        if (json === "") {
          break;
        }
        if (json.trim().length !== json.length) {
          break;
        }
        const float = Number(json);
        if (!Number.isFinite(float)) {
          break;
        }
        return float;
      }
      break;
    // int32, fixed32, uint32: JSON value will be a decimal number. Either numbers or strings are accepted.
    case ScalarType.INT32:
    case ScalarType.FIXED32:
    case ScalarType.SFIXED32:
    case ScalarType.SINT32:
    case ScalarType.UINT32:
      return int32FromJson(json);
    // bytes: JSON value will be the data encoded as a string using standard base64 encoding with paddings.
    // Either standard or URL-safe base64 encoding with/without paddings are accepted.
    case ScalarType.BYTES:
      if (typeof json == "string") {
        if (json === "") {
          return new Uint8Array(0);
        }
        try {
          return base64Decode(json);
        } catch (e) {
          const message = e instanceof Error ? e.message : String(e);
          throw new FieldError(field2, message);
        }
      }
      break;
  }
  return json;
}
function mapKeyFromJson(type, jsonString) {
  switch (type) {
    case ScalarType.BOOL:
      switch (jsonString) {
        case "true":
          return true;
        case "false":
          return false;
      }
      return jsonString;
    case ScalarType.INT32:
    case ScalarType.FIXED32:
    case ScalarType.UINT32:
    case ScalarType.SFIXED32:
    case ScalarType.SINT32:
      return int32FromJson(jsonString);
    case ScalarType.INT64:
    case ScalarType.SINT64:
    case ScalarType.SFIXED64:
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return /^-?0+$/.test(jsonString) ? "0" : jsonString.replace(/^(-?)0+(?=\d)/, "$1");
    default:
      return jsonString;
  }
}
function int32FromJson(json) {
  if (typeof json == "string") {
    if (json === "") {
      return json;
    }
    if (json.trim().length !== json.length) {
      return json;
    }
    const num = Number(json);
    if (Number.isNaN(num)) {
      return json;
    }
    return num;
  }
  return json;
}
function parseJsonString(jsonString, typeName) {
  let json;
  try {
    json = JSON.parse(jsonString);
  } catch (e) {
    const message = e instanceof Error ? e.message : String(e);
    throw new Error(
      `cannot decode message ${typeName} from JSON: ${message}`,
      // @ts-expect-error we use the ES2022 error CTOR option "cause" for better stack traces
      { cause: e }
    );
  }
  checkDuplicateKeys(jsonString, typeName);
  return json;
}
function checkDuplicateKeys(jsonString, typeName) {
  const stack = [];
  let expectKey = false;
  let i = 0;
  while (i < jsonString.length) {
    switch (jsonString[i]) {
      case "{":
        stack.push(/* @__PURE__ */ new Set());
        expectKey = true;
        i++;
        break;
      case "[":
        stack.push(null);
        expectKey = false;
        i++;
        break;
      case "}":
      case "]":
        stack.pop();
        expectKey = false;
        i++;
        break;
      case ",":
        expectKey = stack[stack.length - 1] != null;
        i++;
        break;
      case ":":
        expectKey = false;
        i++;
        break;
      case '"': {
        const open = i++;
        let escaped = false;
        while (i < jsonString.length) {
          if (jsonString[i] == "\\") {
            escaped = true;
            i += 2;
            continue;
          }
          if (jsonString[i] == '"') {
            break;
          }
          i++;
        }
        const close = i++;
        const seen = stack[stack.length - 1];
        if (expectKey && seen) {
          const name = escaped ? JSON.parse(jsonString.substring(open, close + 1)) : jsonString.substring(open + 1, close);
          if (seen.has(name)) {
            throw new Error(`cannot decode message ${typeName} from JSON: duplicate object key "${name}"`);
          }
          seen.add(name);
        }
        expectKey = false;
        break;
      }
      default:
        i++;
        break;
    }
  }
}
function tryWktFromJson(msg, jsonValue, ctx) {
  if (!msg.desc.typeName.startsWith("google.protobuf.")) {
    return false;
  }
  switch (msg.desc.typeName) {
    case "google.protobuf.Any":
      anyFromJson(msg.message, jsonValue, ctx);
      return true;
    case "google.protobuf.Timestamp":
      timestampFromJson(msg.message, jsonValue);
      return true;
    case "google.protobuf.Duration":
      durationFromJson(msg.message, jsonValue);
      return true;
    case "google.protobuf.FieldMask":
      fieldMaskFromJson(msg.message, jsonValue);
      return true;
    case "google.protobuf.Struct":
      structFromJson(msg.message, jsonValue, ctx);
      return true;
    case "google.protobuf.Value":
      valueFromJson(msg.message, jsonValue, ctx);
      return true;
    case "google.protobuf.ListValue":
      listValueFromJson(msg.message, jsonValue, ctx);
      return true;
    default:
      if (isWrapperDesc(msg.desc)) {
        const valueField = msg.desc.fields[0];
        if (jsonValue === null) {
          msg.clear(valueField);
        } else {
          msg.set(valueField, scalarFromJson(valueField, jsonValue));
        }
        return true;
      }
      return false;
  }
}
function anyFromJson(any, json, ctx) {
  var _a;
  if (json === null || Array.isArray(json) || typeof json != "object") {
    throw new Error(`cannot decode message ${any.$typeName} from JSON: expected object but got ${formatVal(json)}`);
  }
  if (Object.keys(json).length == 0) {
    return;
  }
  const typeUrl = json["@type"];
  if (typeof typeUrl != "string" || typeUrl == "") {
    throw new Error(`cannot decode message ${any.$typeName} from JSON: "@type" is empty`);
  }
  const typeName = typeUrl.includes("/") ? typeUrl.substring(typeUrl.lastIndexOf("/") + 1) : typeUrl;
  if (!typeName.length) {
    throw new Error(`cannot decode message ${any.$typeName} from JSON: "@type" is invalid`);
  }
  const desc = (_a = ctx.registry) === null || _a === void 0 ? void 0 : _a.getMessage(typeName);
  if (!desc) {
    throw new Error(`cannot decode message ${any.$typeName} from JSON: ${typeUrl} is not in the type registry`);
  }
  const msg = reflect(desc);
  if (hasCustomJsonRepresentation(desc) && Object.prototype.hasOwnProperty.call(json, "value")) {
    const value = json.value;
    readMessage2(msg, value, ctx);
  } else {
    const copy = Object.assign({}, json);
    delete copy["@type"];
    readMessage2(msg, copy, ctx);
  }
  anyPack(msg.desc, msg.message, any);
}
function timestampFromJson(timestamp, json) {
  if (typeof json !== "string") {
    throw new Error(`cannot decode message ${timestamp.$typeName} from JSON: ${formatVal(json)}`);
  }
  const matches = json.match(/^([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,9}))?(?:Z|([+-][0-9][0-9]:[0-9][0-9]))$/);
  if (!matches) {
    throw new Error(`cannot decode message ${timestamp.$typeName} from JSON: invalid RFC 3339 string`);
  }
  const ms = Date.parse(
    // biome-ignore format: want this to read well
    matches[1] + "-" + matches[2] + "-" + matches[3] + "T" + matches[4] + ":" + matches[5] + ":" + matches[6] + (matches[8] ? matches[8] : "Z")
  );
  if (Number.isNaN(ms)) {
    throw new Error(`cannot decode message ${timestamp.$typeName} from JSON: invalid RFC 3339 string`);
  }
  if (ms < Date.parse("0001-01-01T00:00:00Z") || ms > Date.parse("9999-12-31T23:59:59Z")) {
    throw new Error(`cannot decode message ${timestamp.$typeName} from JSON: must be from 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z inclusive`);
  }
  timestamp.seconds = protoInt64.parse(ms / 1e3);
  timestamp.nanos = 0;
  if (matches[7]) {
    timestamp.nanos = parseInt("1" + matches[7] + "0".repeat(9 - matches[7].length)) - 1e9;
  }
}
function durationFromJson(duration, json) {
  if (typeof json !== "string") {
    throw new Error(`cannot decode message ${duration.$typeName} from JSON: ${formatVal(json)}`);
  }
  const match = json.match(/^(-?[0-9]+)(?:\.([0-9]+))?s/);
  if (match === null) {
    throw new Error(`cannot decode message ${duration.$typeName} from JSON: ${formatVal(json)}`);
  }
  const longSeconds = Number(match[1]);
  if (longSeconds > 315576e6 || longSeconds < -315576e6) {
    throw new Error(`cannot decode message ${duration.$typeName} from JSON: ${formatVal(json)}`);
  }
  duration.seconds = protoInt64.parse(longSeconds);
  if (typeof match[2] !== "string") {
    return;
  }
  const nanosStr = match[2] + "0".repeat(9 - match[2].length);
  duration.nanos = parseInt(nanosStr);
  if (longSeconds < 0 || Object.is(longSeconds, -0)) {
    duration.nanos = -duration.nanos;
  }
}
function fieldMaskFromJson(fieldMask, json) {
  if (typeof json !== "string") {
    throw new Error(`cannot decode message ${fieldMask.$typeName} from JSON: ${formatVal(json)}`);
  }
  if (json === "") {
    return;
  }
  fieldMask.paths = json.split(",").map((path) => {
    if (path.includes("_")) {
      throw new Error(`cannot decode message ${fieldMask.$typeName} from JSON: path names must be lowerCamelCase`);
    }
    return protoSnakeCase(path);
  });
}
function structFromJson(struct, json, ctx) {
  if (typeof json != "object" || json == null || Array.isArray(json)) {
    throw new Error(`cannot decode message ${struct.$typeName} from JSON ${formatVal(json)}`);
  }
  for (const [k, v] of Object.entries(json)) {
    const parsedV = create(ValueSchema);
    valueFromJson(parsedV, v, ctx);
    struct.fields[k] = parsedV;
  }
}
function valueFromJson(value, json, ctx) {
  if (++ctx.depth > ctx.recursionLimit) {
    throw new Error(`cannot decode ${value.$typeName} from JSON: maximum recursion depth of ${ctx.recursionLimit} reached`);
  }
  switch (typeof json) {
    case "number":
      value.kind = { case: "numberValue", value: json };
      break;
    case "string":
      value.kind = { case: "stringValue", value: json };
      break;
    case "boolean":
      value.kind = { case: "boolValue", value: json };
      break;
    case "object":
      if (json === null) {
        value.kind = { case: "nullValue", value: NullValue.NULL_VALUE };
      } else if (Array.isArray(json)) {
        const listValue = create(ListValueSchema);
        listValueFromJson(listValue, json, ctx);
        value.kind = { case: "listValue", value: listValue };
      } else {
        const struct = create(StructSchema);
        structFromJson(struct, json, ctx);
        value.kind = { case: "structValue", value: struct };
      }
      break;
    default:
      throw new Error(`cannot decode message ${value.$typeName} from JSON ${formatVal(json)}`);
  }
  ctx.depth--;
  return value;
}
function listValueFromJson(listValue, json, ctx) {
  if (!Array.isArray(json)) {
    throw new Error(`cannot decode message ${listValue.$typeName} from JSON ${formatVal(json)}`);
  }
  for (const e of json) {
    const value = create(ValueSchema);
    valueFromJson(value, e, ctx);
    listValue.values.push(value);
  }
}

// clients/typescript/node_modules/@connectrpc/connect/dist/esm/code.js
var Code;
(function(Code2) {
  Code2[Code2["Canceled"] = 1] = "Canceled";
  Code2[Code2["Unknown"] = 2] = "Unknown";
  Code2[Code2["InvalidArgument"] = 3] = "InvalidArgument";
  Code2[Code2["DeadlineExceeded"] = 4] = "DeadlineExceeded";
  Code2[Code2["NotFound"] = 5] = "NotFound";
  Code2[Code2["AlreadyExists"] = 6] = "AlreadyExists";
  Code2[Code2["PermissionDenied"] = 7] = "PermissionDenied";
  Code2[Code2["ResourceExhausted"] = 8] = "ResourceExhausted";
  Code2[Code2["FailedPrecondition"] = 9] = "FailedPrecondition";
  Code2[Code2["Aborted"] = 10] = "Aborted";
  Code2[Code2["OutOfRange"] = 11] = "OutOfRange";
  Code2[Code2["Unimplemented"] = 12] = "Unimplemented";
  Code2[Code2["Internal"] = 13] = "Internal";
  Code2[Code2["Unavailable"] = 14] = "Unavailable";
  Code2[Code2["DataLoss"] = 15] = "DataLoss";
  Code2[Code2["Unauthenticated"] = 16] = "Unauthenticated";
})(Code || (Code = {}));

// clients/typescript/node_modules/@connectrpc/connect/dist/esm/protocol-connect/code-string.js
function codeToString(value) {
  const name = Code[value];
  if (typeof name != "string") {
    return value.toString();
  }
  return name[0].toLowerCase() + name.substring(1).replace(/[A-Z]/g, (c) => "_" + c.toLowerCase());
}
var stringToCode;
function codeFromString(value) {
  if (!stringToCode) {
    stringToCode = {};
    for (const value2 of Object.values(Code)) {
      if (typeof value2 == "string") {
        continue;
      }
      stringToCode[codeToString(value2)] = value2;
    }
  }
  return stringToCode[value];
}

// clients/typescript/node_modules/@connectrpc/connect/dist/esm/connect-error.js
var ConnectError = class _ConnectError extends Error {
  /**
   * Create a new ConnectError.
   * If no code is provided, code "unknown" is used.
   * Outgoing details are only relevant for the server side - a service may
   * raise an error with details, and it is up to the protocol implementation
   * to encode and send the details along with the error.
   */
  constructor(message, code = Code.Unknown, metadata, outgoingDetails, cause) {
    super(createMessage(message, code));
    this.name = "ConnectError";
    Object.setPrototypeOf(this, new.target.prototype);
    this.rawMessage = message;
    this.code = code;
    this.metadata = new Headers(metadata !== null && metadata !== void 0 ? metadata : {});
    this.details = outgoingDetails !== null && outgoingDetails !== void 0 ? outgoingDetails : [];
    this.cause = cause;
  }
  /**
   * Convert any value - typically a caught error into a ConnectError,
   * following these rules:
   * - If the value is already a ConnectError, return it as is.
   * - If the value is an AbortError or TimeoutError from the fetch API, return
   *   the message of the error with code Canceled.
   * - For other Errors, return the error message with code Unknown by default.
   * - For other values, return the values String representation as a message,
   *   with the code Unknown by default.
   * The original value will be used for the "cause" property for the new
   * ConnectError.
   */
  static from(reason, code = Code.Unknown) {
    if (reason instanceof _ConnectError) {
      return reason;
    }
    if (reason instanceof Error) {
      if (reason.name == "AbortError" || reason.name == "TimeoutError") {
        return new _ConnectError(reason.message, Code.Canceled);
      }
      return new _ConnectError(reason.message, code, void 0, void 0, reason);
    }
    return new _ConnectError(String(reason), code, void 0, void 0, reason);
  }
  static [Symbol.hasInstance](v) {
    if (!(v instanceof Error)) {
      return false;
    }
    if (Object.getPrototypeOf(v) === _ConnectError.prototype) {
      return true;
    }
    return v.name === "ConnectError" && "code" in v && typeof v.code === "number" && "metadata" in v && "details" in v && Array.isArray(v.details) && "rawMessage" in v && typeof v.rawMessage == "string" && "cause" in v;
  }
  findDetails(typeOrRegistry) {
    const registry = typeOrRegistry.kind === "message" ? {
      getMessage: (typeName) => typeName === typeOrRegistry.typeName ? typeOrRegistry : void 0
    } : typeOrRegistry;
    const details = [];
    for (const data of this.details) {
      if ("desc" in data) {
        if (registry.getMessage(data.desc.typeName)) {
          details.push(create(data.desc, data.value));
        }
        continue;
      }
      const desc = registry.getMessage(data.type);
      if (desc) {
        try {
          details.push(fromBinary(desc, data.value));
        } catch (_) {
        }
      }
    }
    return details;
  }
};
function createMessage(message, code) {
  return message.length ? `[${codeToString(code)}] ${message}` : `[${codeToString(code)}]`;
}

// clients/typescript/node_modules/@connectrpc/connect/dist/esm/http-headers.js
function appendHeaders(...headers) {
  const h2 = new Headers();
  for (const e of headers) {
    e.forEach((value, key) => {
      h2.append(key, value);
    });
  }
  return h2;
}

// clients/typescript/node_modules/@connectrpc/connect/dist/esm/any-client.js
function makeAnyClient(service, createMethod) {
  const client2 = {};
  for (const desc of service.methods) {
    const method = createMethod(desc);
    if (method != null) {
      client2[desc.localName] = method;
    }
  }
  return client2;
}

// clients/typescript/node_modules/@connectrpc/connect/dist/esm/protocol/compression.js
var compressedFlag = 1;

// clients/typescript/node_modules/@connectrpc/connect/dist/esm/protocol/limit-io.js
function assertReadMaxBytes(readMaxBytes, bytesRead, totalSizeKnown = false) {
  if (bytesRead > readMaxBytes) {
    let message = `message size is larger than configured readMaxBytes ${readMaxBytes}`;
    if (totalSizeKnown) {
      message = `message size ${bytesRead} is larger than configured readMaxBytes ${readMaxBytes}`;
    }
    throw new ConnectError(message, Code.ResourceExhausted);
  }
}

// clients/typescript/node_modules/@connectrpc/connect/dist/esm/protocol/envelope.js
function createEnvelopeDecoder(readMaxBytes) {
  return new EnvelopeDecoderImpl(readMaxBytes);
}
var EnvelopeDecoderImpl = class {
  constructor(readMaxBytes) {
    this.readMaxBytes = readMaxBytes;
    this.header = new Uint8Array(5);
    this.headerView = new DataView(this.header.buffer);
    this.buf = [];
  }
  get byteLength() {
    return this.buf.reduce((a, b) => a + b.byteLength, 0);
  }
  decode(chunk) {
    this.buf.push(chunk);
    const envs = [];
    for (; ; ) {
      let env = this.pop();
      if (!env) {
        break;
      }
      envs.push(env);
    }
    return envs;
  }
  // consume an enveloped message
  pop() {
    if (!this.env) {
      this.env = this.head();
      if (!this.env) {
        return void 0;
      }
    }
    if (this.cons(this.env.data)) {
      const env = this.env;
      this.env = void 0;
      return env;
    }
    return void 0;
  }
  // consume header
  head() {
    if (!this.cons(this.header)) {
      return void 0;
    }
    const flags = this.headerView.getUint8(0);
    const length = this.headerView.getUint32(1);
    assertReadMaxBytes(this.readMaxBytes, length, true);
    return {
      flags,
      data: new Uint8Array(length)
    };
  }
  // consume from buffer, fill target
  cons(target) {
    const wantLength = target.byteLength;
    if (this.byteLength < wantLength) {
      return false;
    }
    let offset = 0;
    while (offset < wantLength) {
      const chunk = this.buf.shift();
      if (chunk.byteLength > wantLength - offset) {
        target.set(chunk.subarray(0, wantLength - offset), offset);
        this.buf.unshift(chunk.subarray(wantLength - offset));
        offset += wantLength - offset;
      } else {
        target.set(chunk, offset);
        offset += chunk.byteLength;
      }
    }
    return true;
  }
};
function createEnvelopeReadableStream(stream) {
  let reader;
  const buffer = createEnvelopeDecoder(4294967295);
  return new ReadableStream({
    start() {
      reader = stream.getReader();
    },
    async pull(controller) {
      let enqueuedOnce = false;
      while (!enqueuedOnce) {
        const result = await reader.read();
        if (result.done) {
          if (buffer.byteLength > 0) {
            controller.error(new ConnectError("protocol error: incomplete envelope", Code.InvalidArgument));
          }
          controller.close();
        } else {
          for (const env of buffer.decode(result.value)) {
            controller.enqueue(env);
            enqueuedOnce = true;
          }
        }
      }
    }
  });
}
function encodeEnvelope(flags, data) {
  const bytes = new Uint8Array(data.length + 5);
  bytes.set(data, 5);
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  v.setUint8(0, flags);
  v.setUint32(1, data.length);
  return bytes;
}

// clients/typescript/node_modules/@connectrpc/connect/dist/esm/protocol/async-iterable.js
var __asyncValues = function(o) {
  if (!Symbol.asyncIterator) throw new TypeError("Symbol.asyncIterator is not defined.");
  var m = o[Symbol.asyncIterator], i;
  return m ? m.call(o) : (o = typeof __values === "function" ? __values(o) : o[Symbol.iterator](), i = {}, verb("next"), verb("throw"), verb("return"), i[Symbol.asyncIterator] = function() {
    return this;
  }, i);
  function verb(n) {
    i[n] = o[n] && function(v) {
      return new Promise(function(resolve, reject) {
        v = o[n](v), settle(resolve, reject, v.done, v.value);
      });
    };
  }
  function settle(resolve, reject, d, v) {
    Promise.resolve(v).then(function(v2) {
      resolve({ value: v2, done: d });
    }, reject);
  }
};
var __await = function(v) {
  return this instanceof __await ? (this.v = v, this) : new __await(v);
};
var __asyncGenerator = function(thisArg, _arguments, generator) {
  if (!Symbol.asyncIterator) throw new TypeError("Symbol.asyncIterator is not defined.");
  var g = generator.apply(thisArg, _arguments || []), i, q = [];
  return i = Object.create((typeof AsyncIterator === "function" ? AsyncIterator : Object).prototype), verb("next"), verb("throw"), verb("return", awaitReturn), i[Symbol.asyncIterator] = function() {
    return this;
  }, i;
  function awaitReturn(f) {
    return function(v) {
      return Promise.resolve(v).then(f, reject);
    };
  }
  function verb(n, f) {
    if (g[n]) {
      i[n] = function(v) {
        return new Promise(function(a, b) {
          q.push([n, v, a, b]) > 1 || resume(n, v);
        });
      };
      if (f) i[n] = f(i[n]);
    }
  }
  function resume(n, v) {
    try {
      step(g[n](v));
    } catch (e) {
      settle(q[0][3], e);
    }
  }
  function step(r) {
    r.value instanceof __await ? Promise.resolve(r.value.v).then(fulfill, reject) : settle(q[0][2], r);
  }
  function fulfill(value) {
    resume("next", value);
  }
  function reject(value) {
    resume("throw", value);
  }
  function settle(f, v) {
    if (f(v), q.shift(), q.length) resume(q[0][0], q[0][1]);
  }
};
var __asyncDelegator = function(o) {
  var i, p;
  return i = {}, verb("next"), verb("throw", function(e) {
    throw e;
  }), verb("return"), i[Symbol.iterator] = function() {
    return this;
  }, i;
  function verb(n, f) {
    i[n] = o[n] ? function(v) {
      return (p = !p) ? { value: __await(o[n](v)), done: false } : f ? f(v) : v;
    } : f;
  }
};
function createAsyncIterable(items) {
  return __asyncGenerator(this, arguments, function* createAsyncIterable_1() {
    yield __await(yield* __asyncDelegator(__asyncValues(items)));
  });
}

// clients/typescript/node_modules/@connectrpc/connect/dist/esm/promise-client.js
var __asyncValues2 = function(o) {
  if (!Symbol.asyncIterator) throw new TypeError("Symbol.asyncIterator is not defined.");
  var m = o[Symbol.asyncIterator], i;
  return m ? m.call(o) : (o = typeof __values === "function" ? __values(o) : o[Symbol.iterator](), i = {}, verb("next"), verb("throw"), verb("return"), i[Symbol.asyncIterator] = function() {
    return this;
  }, i);
  function verb(n) {
    i[n] = o[n] && function(v) {
      return new Promise(function(resolve, reject) {
        v = o[n](v), settle(resolve, reject, v.done, v.value);
      });
    };
  }
  function settle(resolve, reject, d, v) {
    Promise.resolve(v).then(function(v2) {
      resolve({ value: v2, done: d });
    }, reject);
  }
};
var __await2 = function(v) {
  return this instanceof __await2 ? (this.v = v, this) : new __await2(v);
};
var __asyncDelegator2 = function(o) {
  var i, p;
  return i = {}, verb("next"), verb("throw", function(e) {
    throw e;
  }), verb("return"), i[Symbol.iterator] = function() {
    return this;
  }, i;
  function verb(n, f) {
    i[n] = o[n] ? function(v) {
      return (p = !p) ? { value: __await2(o[n](v)), done: false } : f ? f(v) : v;
    } : f;
  }
};
var __asyncGenerator2 = function(thisArg, _arguments, generator) {
  if (!Symbol.asyncIterator) throw new TypeError("Symbol.asyncIterator is not defined.");
  var g = generator.apply(thisArg, _arguments || []), i, q = [];
  return i = Object.create((typeof AsyncIterator === "function" ? AsyncIterator : Object).prototype), verb("next"), verb("throw"), verb("return", awaitReturn), i[Symbol.asyncIterator] = function() {
    return this;
  }, i;
  function awaitReturn(f) {
    return function(v) {
      return Promise.resolve(v).then(f, reject);
    };
  }
  function verb(n, f) {
    if (g[n]) {
      i[n] = function(v) {
        return new Promise(function(a, b) {
          q.push([n, v, a, b]) > 1 || resume(n, v);
        });
      };
      if (f) i[n] = f(i[n]);
    }
  }
  function resume(n, v) {
    try {
      step(g[n](v));
    } catch (e) {
      settle(q[0][3], e);
    }
  }
  function step(r) {
    r.value instanceof __await2 ? Promise.resolve(r.value.v).then(fulfill, reject) : settle(q[0][2], r);
  }
  function fulfill(value) {
    resume("next", value);
  }
  function reject(value) {
    resume("throw", value);
  }
  function settle(f, v) {
    if (f(v), q.shift(), q.length) resume(q[0][0], q[0][1]);
  }
};
function createClient(service, transport) {
  return makeAnyClient(service, (method) => {
    switch (method.methodKind) {
      case "unary":
        return createUnaryFn(transport, method);
      case "server_streaming":
        return createServerStreamingFn(transport, method);
      case "client_streaming":
        return createClientStreamingFn(transport, method);
      case "bidi_streaming":
        return createBiDiStreamingFn(transport, method);
      default:
        return null;
    }
  });
}
function createUnaryFn(transport, method) {
  return async (input, options) => {
    var _a, _b;
    const response = await transport.unary(method, options === null || options === void 0 ? void 0 : options.signal, options === null || options === void 0 ? void 0 : options.timeoutMs, options === null || options === void 0 ? void 0 : options.headers, input, options === null || options === void 0 ? void 0 : options.contextValues);
    (_a = options === null || options === void 0 ? void 0 : options.onHeader) === null || _a === void 0 ? void 0 : _a.call(options, response.header);
    (_b = options === null || options === void 0 ? void 0 : options.onTrailer) === null || _b === void 0 ? void 0 : _b.call(options, response.trailer);
    return response.message;
  };
}
function createServerStreamingFn(transport, method) {
  return (input, options) => handleStreamResponse(transport.stream(method, options === null || options === void 0 ? void 0 : options.signal, options === null || options === void 0 ? void 0 : options.timeoutMs, options === null || options === void 0 ? void 0 : options.headers, createAsyncIterable([input]), options === null || options === void 0 ? void 0 : options.contextValues), options);
}
function createClientStreamingFn(transport, method) {
  return async (request, options) => {
    var _a, e_1, _b, _c;
    var _d, _e;
    const response = await transport.stream(method, options === null || options === void 0 ? void 0 : options.signal, options === null || options === void 0 ? void 0 : options.timeoutMs, options === null || options === void 0 ? void 0 : options.headers, request, options === null || options === void 0 ? void 0 : options.contextValues);
    (_d = options === null || options === void 0 ? void 0 : options.onHeader) === null || _d === void 0 ? void 0 : _d.call(options, response.header);
    let singleMessage;
    let count = 0;
    try {
      for (var _f = true, _g = __asyncValues2(response.message), _h; _h = await _g.next(), _a = _h.done, !_a; _f = true) {
        _c = _h.value;
        _f = false;
        const message = _c;
        singleMessage = message;
        count++;
      }
    } catch (e_1_1) {
      e_1 = { error: e_1_1 };
    } finally {
      try {
        if (!_f && !_a && (_b = _g.return)) await _b.call(_g);
      } finally {
        if (e_1) throw e_1.error;
      }
    }
    if (!singleMessage) {
      throw new ConnectError("protocol error: missing response message", Code.Unimplemented);
    }
    if (count > 1) {
      throw new ConnectError("protocol error: received extra messages for client streaming method", Code.Unimplemented);
    }
    (_e = options === null || options === void 0 ? void 0 : options.onTrailer) === null || _e === void 0 ? void 0 : _e.call(options, response.trailer);
    return singleMessage;
  };
}
function createBiDiStreamingFn(transport, method) {
  return (request, options) => handleStreamResponse(transport.stream(method, options === null || options === void 0 ? void 0 : options.signal, options === null || options === void 0 ? void 0 : options.timeoutMs, options === null || options === void 0 ? void 0 : options.headers, request, options === null || options === void 0 ? void 0 : options.contextValues), options);
}
function handleStreamResponse(stream, options) {
  const it = (function() {
    return __asyncGenerator2(this, arguments, function* () {
      var _a, _b;
      const response = yield __await2(stream);
      (_a = options === null || options === void 0 ? void 0 : options.onHeader) === null || _a === void 0 ? void 0 : _a.call(options, response.header);
      yield __await2(yield* __asyncDelegator2(__asyncValues2(response.message)));
      (_b = options === null || options === void 0 ? void 0 : options.onTrailer) === null || _b === void 0 ? void 0 : _b.call(options, response.trailer);
    });
  })()[Symbol.asyncIterator]();
  return {
    [Symbol.asyncIterator]: () => ({
      next: () => it.next()
    })
  };
}

// clients/typescript/node_modules/@connectrpc/connect/dist/esm/protocol/signals.js
function createLinkedAbortController(...signals) {
  const controller = new AbortController();
  const sa = signals.filter((s) => s !== void 0).concat(controller.signal);
  for (const signal of sa) {
    if (signal.aborted) {
      onAbort.apply(signal);
      break;
    }
    signal.addEventListener("abort", onAbort);
  }
  function onAbort() {
    if (!controller.signal.aborted) {
      controller.abort(getAbortSignalReason(this));
    }
    for (const signal of sa) {
      signal.removeEventListener("abort", onAbort);
    }
  }
  return controller;
}
function createDeadlineSignal(timeoutMs) {
  const controller = new AbortController();
  const listener = () => {
    controller.abort(new ConnectError("the operation timed out", Code.DeadlineExceeded));
  };
  let timeoutId;
  if (timeoutMs !== void 0) {
    if (timeoutMs <= 0)
      listener();
    else
      timeoutId = setTimeout(listener, timeoutMs);
  }
  return {
    signal: controller.signal,
    cleanup: () => clearTimeout(timeoutId)
  };
}
function getAbortSignalReason(signal) {
  if (!signal.aborted) {
    return void 0;
  }
  if (signal.reason !== void 0) {
    return signal.reason;
  }
  const e = new Error("This operation was aborted");
  e.name = "AbortError";
  return e;
}

// clients/typescript/node_modules/@connectrpc/connect/dist/esm/context-values.js
function createContextValues() {
  return {
    get(key) {
      return key.id in this ? this[key.id] : key.defaultValue;
    },
    set(key, value) {
      this[key.id] = value;
      return this;
    },
    delete(key) {
      delete this[key.id];
      return this;
    }
  };
}

// clients/typescript/node_modules/@bufbuild/protobuf/dist/esm/codegenv2/service.js
function serviceDesc(file, path, ...paths) {
  if (paths.length > 0) {
    throw new Error();
  }
  return file.services[path];
}

// clients/typescript/node_modules/@connectrpc/connect/dist/esm/protocol/create-method-url.js
function createMethodUrl(baseUrl, method) {
  return baseUrl.toString().replace(/\/?$/, `/${method.parent.typeName}/${method.name}`);
}

// clients/typescript/node_modules/@connectrpc/connect/dist/esm/protocol/normalize.js
function normalize(desc, message) {
  return create(desc, message);
}
function normalizeIterable(desc, input) {
  function transform(result) {
    if (result.done === true) {
      return result;
    }
    return {
      done: result.done,
      value: normalize(desc, result.value)
    };
  }
  return {
    [Symbol.asyncIterator]() {
      const it = input[Symbol.asyncIterator]();
      const res = {
        next: () => it.next().then(transform)
      };
      if (it.throw !== void 0) {
        res.throw = (e) => it.throw(e).then(transform);
      }
      if (it.return !== void 0) {
        res.return = (v) => it.return(v).then(transform);
      }
      return res;
    }
  };
}

// clients/typescript/node_modules/@connectrpc/connect/dist/esm/interceptor.js
function applyInterceptors(next, interceptors) {
  if (!interceptors) {
    return next;
  }
  for (const i of interceptors.concat().reverse()) {
    next = i(next);
  }
  return next;
}

// clients/typescript/node_modules/@connectrpc/connect/dist/esm/protocol/serialization.js
function getJsonOptions(options) {
  var _a;
  const o = Object.assign({}, options);
  (_a = o.ignoreUnknownFields) !== null && _a !== void 0 ? _a : o.ignoreUnknownFields = true;
  return o;
}
function createClientMethodSerializers(method, useBinaryFormat, jsonOptions, binaryOptions) {
  const input = useBinaryFormat ? createBinarySerialization(method.input, binaryOptions) : createJsonSerialization(method.input, jsonOptions);
  const output = useBinaryFormat ? createBinarySerialization(method.output, binaryOptions) : createJsonSerialization(method.output, jsonOptions);
  return { parse: output.parse, serialize: input.serialize };
}
function createBinarySerialization(desc, options) {
  return {
    parse(data) {
      try {
        return fromBinary(desc, data, options);
      } catch (e) {
        const m = e instanceof Error ? e.message : String(e);
        throw new ConnectError(`parse binary: ${m}`, Code.Internal);
      }
    },
    serialize(data) {
      try {
        return toBinary(desc, data, options);
      } catch (e) {
        const m = e instanceof Error ? e.message : String(e);
        throw new ConnectError(`serialize binary: ${m}`, Code.Internal);
      }
    }
  };
}
function createJsonSerialization(desc, options) {
  var _a, _b;
  const textEncoder = (_a = options === null || options === void 0 ? void 0 : options.textEncoder) !== null && _a !== void 0 ? _a : new TextEncoder();
  const textDecoder = (_b = options === null || options === void 0 ? void 0 : options.textDecoder) !== null && _b !== void 0 ? _b : new TextDecoder();
  const o = getJsonOptions(options);
  return {
    parse(data) {
      try {
        const json = textDecoder.decode(data);
        return fromJsonString(desc, json, o);
      } catch (e) {
        throw ConnectError.from(e, Code.InvalidArgument);
      }
    },
    serialize(data) {
      try {
        const json = toJsonString(desc, data, o);
        return textEncoder.encode(json);
      } catch (e) {
        throw ConnectError.from(e, Code.Internal);
      }
    }
  };
}

// clients/typescript/node_modules/@connectrpc/connect/dist/esm/protocol-connect/content-type.js
var contentTypeRegExp = /^application\/(connect\+)?(?:(json)(?:; ?charset=utf-?8)?|(proto))$/i;
var contentTypeUnaryProto = "application/proto";
var contentTypeUnaryJson = "application/json";
var contentTypeStreamProto = "application/connect+proto";
var contentTypeStreamJson = "application/connect+json";
function parseContentType(contentType) {
  const match = contentType === null || contentType === void 0 ? void 0 : contentType.match(contentTypeRegExp);
  if (!match) {
    return void 0;
  }
  const stream = !!match[1];
  const binary = !!match[3];
  return { stream, binary };
}

// clients/typescript/node_modules/@connectrpc/connect/dist/esm/protocol-connect/error-json.js
function errorFromJson(jsonValue, metadata, fallback) {
  var _a;
  if (metadata) {
    new Headers(metadata).forEach((value, key) => fallback.metadata.append(key, value));
  }
  if (typeof jsonValue !== "object" || jsonValue == null || Array.isArray(jsonValue)) {
    throw fallback;
  }
  let code = fallback.code;
  if ("code" in jsonValue && typeof jsonValue.code === "string") {
    code = (_a = codeFromString(jsonValue.code)) !== null && _a !== void 0 ? _a : code;
  }
  const message = jsonValue.message;
  if (message != null && typeof message !== "string") {
    throw fallback;
  }
  const error = new ConnectError(message !== null && message !== void 0 ? message : "", code, metadata);
  if ("details" in jsonValue && Array.isArray(jsonValue.details)) {
    for (const detail of jsonValue.details) {
      if (detail === null || typeof detail != "object" || Array.isArray(detail) || typeof detail.type != "string" || typeof detail.value != "string") {
        throw fallback;
      }
      try {
        error.details.push({
          type: detail.type,
          value: base64Decode(detail.value),
          debug: detail.debug
        });
      } catch (e) {
        throw fallback;
      }
    }
  }
  return error;
}

// clients/typescript/node_modules/@connectrpc/connect/dist/esm/protocol-connect/end-stream.js
var endStreamFlag = 2;
function endStreamFromJson(data) {
  const parseErr = new ConnectError("invalid end stream", Code.Unknown);
  let jsonValue;
  try {
    jsonValue = JSON.parse(typeof data == "string" ? data : new TextDecoder().decode(data));
  } catch (e) {
    throw parseErr;
  }
  if (typeof jsonValue != "object" || jsonValue == null || Array.isArray(jsonValue)) {
    throw parseErr;
  }
  const metadata = new Headers();
  if ("metadata" in jsonValue) {
    if (typeof jsonValue.metadata != "object" || jsonValue.metadata == null || Array.isArray(jsonValue.metadata)) {
      throw parseErr;
    }
    for (const [key, values] of Object.entries(jsonValue.metadata)) {
      if (!Array.isArray(values) || values.some((value) => typeof value != "string")) {
        throw parseErr;
      }
      for (const value of values) {
        metadata.append(key, value);
      }
    }
  }
  const error = "error" in jsonValue && jsonValue.error != null ? errorFromJson(jsonValue.error, metadata, parseErr) : void 0;
  return { metadata, error };
}

// clients/typescript/node_modules/@connectrpc/connect/dist/esm/protocol-connect/headers.js
var headerContentType = "Content-Type";
var headerUnaryContentLength = "Content-Length";
var headerUnaryEncoding = "Content-Encoding";
var headerUnaryAcceptEncoding = "Accept-Encoding";
var headerTimeout = "Connect-Timeout-Ms";
var headerProtocolVersion = "Connect-Protocol-Version";
var headerUserAgent = "User-Agent";

// clients/typescript/node_modules/@connectrpc/connect/dist/esm/protocol-connect/http-status.js
function codeFromHttpStatus(httpStatus) {
  switch (httpStatus) {
    case 400:
      return Code.Internal;
    case 401:
      return Code.Unauthenticated;
    case 403:
      return Code.PermissionDenied;
    case 404:
      return Code.Unimplemented;
    case 429:
      return Code.Unavailable;
    case 502:
      return Code.Unavailable;
    case 503:
      return Code.Unavailable;
    case 504:
      return Code.Unavailable;
    default:
      return Code.Unknown;
  }
}

// clients/typescript/node_modules/@connectrpc/connect/dist/esm/protocol-connect/trailer-mux.js
function trailerDemux(header) {
  const h2 = new Headers(), t = new Headers();
  header.forEach((value, key) => {
    if (key.toLowerCase().startsWith("trailer-")) {
      t.append(key.substring(8), value);
    } else {
      h2.append(key, value);
    }
  });
  return [h2, t];
}

// clients/typescript/node_modules/@connectrpc/connect/dist/esm/protocol-connect/version.js
var protocolVersion = "1";

// clients/typescript/node_modules/@connectrpc/connect/dist/esm/protocol-connect/request-header.js
function requestHeader(methodKind, useBinaryFormat, timeoutMs, userProvidedHeaders, setUserAgent) {
  const result = new Headers(userProvidedHeaders !== null && userProvidedHeaders !== void 0 ? userProvidedHeaders : {});
  if (timeoutMs !== void 0) {
    result.set(headerTimeout, `${timeoutMs}`);
  }
  result.set(headerContentType, methodKind == "unary" ? useBinaryFormat ? contentTypeUnaryProto : contentTypeUnaryJson : useBinaryFormat ? contentTypeStreamProto : contentTypeStreamJson);
  result.set(headerProtocolVersion, protocolVersion);
  if (!result.has(headerUserAgent) && setUserAgent) {
    result.set(headerUserAgent, "connect-es/2.1.2");
  }
  return result;
}

// clients/typescript/node_modules/@connectrpc/connect/dist/esm/protocol-connect/validate-response.js
function validateResponse(methodKind, useBinaryFormat, status, headers) {
  const mimeType = headers.get(headerContentType);
  const parsedType = parseContentType(mimeType);
  if (status !== 200) {
    const errorFromStatus = new ConnectError(`HTTP ${status}`, codeFromHttpStatus(status), headers);
    if (methodKind == "unary" && parsedType && !parsedType.binary) {
      return { isUnaryError: true, unaryError: errorFromStatus };
    }
    throw errorFromStatus;
  }
  const allowedContentType = {
    binary: useBinaryFormat,
    stream: methodKind !== "unary"
  };
  if ((parsedType === null || parsedType === void 0 ? void 0 : parsedType.binary) !== allowedContentType.binary || parsedType.stream !== allowedContentType.stream) {
    throw new ConnectError(`unsupported content type ${mimeType}`, parsedType === void 0 ? Code.Unknown : Code.Internal, headers);
  }
  return { isUnaryError: false };
}

// clients/typescript/node_modules/@connectrpc/connect/dist/esm/protocol-connect/get-request.js
var contentTypePrefix = "application/";
function encodeMessageForUrl(message, useBase64) {
  if (useBase64) {
    return base64Encode(message, "url");
  }
  return encodeURIComponent(new TextDecoder().decode(message));
}
function transformConnectPostToGetRequest(request, message, useBase64) {
  let query = `?connect=v${protocolVersion}`;
  let compressionQuery = "";
  const compression = request.header.get(headerUnaryEncoding);
  if (compression !== null && compression !== "identity") {
    compressionQuery = "&compression=" + encodeURIComponent(compression);
    useBase64 = true;
  }
  if (useBase64) {
    query += "&base64=1";
  }
  query += compressionQuery;
  const contentType = request.header.get(headerContentType);
  if ((contentType === null || contentType === void 0 ? void 0 : contentType.indexOf(contentTypePrefix)) === 0) {
    query += "&encoding=" + encodeURIComponent(contentType.slice(contentTypePrefix.length));
  }
  query += "&message=" + encodeMessageForUrl(message, useBase64);
  const url = request.url + query;
  const header = new Headers(request.header);
  for (const h2 of [
    headerProtocolVersion,
    headerContentType,
    headerUnaryContentLength,
    headerUnaryEncoding,
    headerUnaryAcceptEncoding
  ]) {
    header.delete(h2);
  }
  return Object.assign(Object.assign({}, request), {
    requestMethod: "GET",
    url,
    header
  });
}

// clients/typescript/node_modules/@connectrpc/connect/dist/esm/protocol/run-call.js
function runUnaryCall(opt) {
  const next = applyInterceptors(opt.next, opt.interceptors);
  const [signal, abort, done] = setupSignal(opt);
  const req = Object.assign(Object.assign({}, opt.req), { message: normalize(opt.req.method.input, opt.req.message), signal });
  return next(req).then((res) => {
    done();
    return res;
  }, abort);
}
function runStreamingCall(opt) {
  const next = applyInterceptors(opt.next, opt.interceptors);
  const [signal, abort, done] = setupSignal(opt);
  const req = Object.assign(Object.assign({}, opt.req), { message: normalizeIterable(opt.req.method.input, opt.req.message), signal });
  let doneCalled = false;
  signal.addEventListener("abort", function() {
    var _a, _b;
    const it = opt.req.message[Symbol.asyncIterator]();
    if (!doneCalled) {
      (_a = it.throw) === null || _a === void 0 ? void 0 : _a.call(it, this.reason).catch(() => {
      });
    }
    (_b = it.return) === null || _b === void 0 ? void 0 : _b.call(it).catch(() => {
    });
  });
  return next(req).then((res) => {
    return Object.assign(Object.assign({}, res), { message: {
      [Symbol.asyncIterator]() {
        const it = res.message[Symbol.asyncIterator]();
        return {
          next() {
            return it.next().then((r) => {
              if (r.done == true) {
                doneCalled = true;
                done();
              }
              return r;
            }, abort);
          }
          // We deliberately omit throw/return.
        };
      }
    } });
  }, abort);
}
function setupSignal(opt) {
  const { signal, cleanup } = createDeadlineSignal(opt.timeoutMs);
  const controller = createLinkedAbortController(opt.signal, signal);
  return [
    controller.signal,
    function abort(reason) {
      const e = controller.signal.aborted ? ConnectError.from(getAbortSignalReason(controller.signal), Code.Canceled) : ConnectError.from(reason);
      controller.abort(e);
      cleanup();
      return Promise.reject(e);
    },
    function done() {
      cleanup();
      controller.abort();
    }
  ];
}

// clients/typescript/node_modules/@connectrpc/connect-web/dist/esm/assert-fetch-api.js
function assertFetchApi() {
  try {
    new Headers();
  } catch (_) {
    throw new Error("connect-web requires the fetch API. Are you running on an old version of Node.js? Node.js is not supported in Connect for Web - please stay tuned for Connect for Node.");
  }
}

// clients/typescript/node_modules/@connectrpc/connect-web/dist/esm/connect-transport.js
var __await3 = function(v) {
  return this instanceof __await3 ? (this.v = v, this) : new __await3(v);
};
var __asyncGenerator3 = function(thisArg, _arguments, generator) {
  if (!Symbol.asyncIterator) throw new TypeError("Symbol.asyncIterator is not defined.");
  var g = generator.apply(thisArg, _arguments || []), i, q = [];
  return i = Object.create((typeof AsyncIterator === "function" ? AsyncIterator : Object).prototype), verb("next"), verb("throw"), verb("return", awaitReturn), i[Symbol.asyncIterator] = function() {
    return this;
  }, i;
  function awaitReturn(f) {
    return function(v) {
      return Promise.resolve(v).then(f, reject);
    };
  }
  function verb(n, f) {
    if (g[n]) {
      i[n] = function(v) {
        return new Promise(function(a, b) {
          q.push([n, v, a, b]) > 1 || resume(n, v);
        });
      };
      if (f) i[n] = f(i[n]);
    }
  }
  function resume(n, v) {
    try {
      step(g[n](v));
    } catch (e) {
      settle(q[0][3], e);
    }
  }
  function step(r) {
    r.value instanceof __await3 ? Promise.resolve(r.value.v).then(fulfill, reject) : settle(q[0][2], r);
  }
  function fulfill(value) {
    resume("next", value);
  }
  function reject(value) {
    resume("throw", value);
  }
  function settle(f, v) {
    if (f(v), q.shift(), q.length) resume(q[0][0], q[0][1]);
  }
};
var fetchOptions = {
  redirect: "error"
};
function createConnectTransport(options) {
  var _a;
  assertFetchApi();
  const useBinaryFormat = (_a = options.useBinaryFormat) !== null && _a !== void 0 ? _a : false;
  return {
    async unary(method, signal, timeoutMs, header, message, contextValues) {
      const { serialize, parse } = createClientMethodSerializers(method, useBinaryFormat, options.jsonOptions, options.binaryOptions);
      timeoutMs = timeoutMs === void 0 ? options.defaultTimeoutMs : timeoutMs <= 0 ? void 0 : timeoutMs;
      return await runUnaryCall({
        interceptors: options.interceptors,
        signal,
        timeoutMs,
        req: {
          stream: false,
          service: method.parent,
          method,
          requestMethod: "POST",
          url: createMethodUrl(options.baseUrl, method),
          header: requestHeader(method.methodKind, useBinaryFormat, timeoutMs, header, false),
          contextValues: contextValues !== null && contextValues !== void 0 ? contextValues : createContextValues(),
          message
        },
        next: async (req) => {
          var _a2;
          const useGet = options.useHttpGet === true && method.idempotency === MethodOptions_IdempotencyLevel.NO_SIDE_EFFECTS;
          let body = null;
          if (useGet) {
            req = transformConnectPostToGetRequest(req, serialize(req.message), useBinaryFormat);
          } else {
            body = serialize(req.message);
          }
          const fetch = (_a2 = options.fetch) !== null && _a2 !== void 0 ? _a2 : globalThis.fetch;
          const response = await fetch(req.url, Object.assign(Object.assign({}, fetchOptions), { method: req.requestMethod, headers: req.header, signal: req.signal, body }));
          const { isUnaryError, unaryError } = validateResponse(method.methodKind, useBinaryFormat, response.status, response.headers);
          if (isUnaryError) {
            throw errorFromJson(await response.json(), appendHeaders(...trailerDemux(response.headers)), unaryError);
          }
          const [demuxedHeader, demuxedTrailer] = trailerDemux(response.headers);
          return {
            stream: false,
            service: method.parent,
            method,
            header: demuxedHeader,
            message: useBinaryFormat ? parse(new Uint8Array(await response.arrayBuffer())) : fromJson(method.output, await response.json(), getJsonOptions(options.jsonOptions)),
            trailer: demuxedTrailer
          };
        }
      });
    },
    async stream(method, signal, timeoutMs, header, input, contextValues) {
      const { serialize, parse } = createClientMethodSerializers(method, useBinaryFormat, options.jsonOptions, options.binaryOptions);
      function parseResponseBody(body, trailerTarget, header2, signal2) {
        return __asyncGenerator3(this, arguments, function* parseResponseBody_1() {
          const reader = createEnvelopeReadableStream(body).getReader();
          let endStreamReceived = false;
          for (; ; ) {
            const result = yield __await3(reader.read());
            if (result.done) {
              break;
            }
            const { flags, data } = result.value;
            if ((flags & compressedFlag) === compressedFlag) {
              throw new ConnectError(`protocol error: received unsupported compressed output`, Code.Internal);
            }
            if ((flags & endStreamFlag) === endStreamFlag) {
              endStreamReceived = true;
              const endStream = endStreamFromJson(data);
              if (endStream.error) {
                const error = endStream.error;
                header2.forEach((value, key) => {
                  error.metadata.append(key, value);
                });
                throw error;
              }
              endStream.metadata.forEach((value, key) => trailerTarget.set(key, value));
              continue;
            }
            yield yield __await3(parse(data));
          }
          if ("throwIfAborted" in signal2) {
            signal2.throwIfAborted();
          }
          if (!endStreamReceived) {
            throw "missing EndStreamResponse";
          }
        });
      }
      async function createRequestBody(input2) {
        if (method.methodKind != "server_streaming") {
          throw "The fetch API does not support streaming request bodies";
        }
        const r = await input2[Symbol.asyncIterator]().next();
        if (r.done == true) {
          throw "missing request message";
        }
        return encodeEnvelope(0, serialize(r.value));
      }
      timeoutMs = timeoutMs === void 0 ? options.defaultTimeoutMs : timeoutMs <= 0 ? void 0 : timeoutMs;
      return await runStreamingCall({
        interceptors: options.interceptors,
        timeoutMs,
        signal,
        req: {
          stream: true,
          service: method.parent,
          method,
          requestMethod: "POST",
          url: createMethodUrl(options.baseUrl, method),
          header: requestHeader(method.methodKind, useBinaryFormat, timeoutMs, header, false),
          contextValues: contextValues !== null && contextValues !== void 0 ? contextValues : createContextValues(),
          message: input
        },
        next: async (req) => {
          var _a2;
          const fetch = (_a2 = options.fetch) !== null && _a2 !== void 0 ? _a2 : globalThis.fetch;
          const fRes = await fetch(req.url, Object.assign(Object.assign({}, fetchOptions), { method: req.requestMethod, headers: req.header, signal: req.signal, body: await createRequestBody(req.message) }));
          validateResponse(method.methodKind, useBinaryFormat, fRes.status, fRes.headers);
          if (fRes.body === null) {
            throw "missing response body";
          }
          const trailer = new Headers();
          const res = Object.assign(Object.assign({}, req), { header: fRes.headers, trailer, message: parseResponseBody(fRes.body, trailer, fRes.headers, req.signal) });
          return res;
        }
      });
    }
  };
}

// clients/typescript/src/transport/browser.ts
function defaultTransport(baseUrl, interceptors) {
  return {
    transport: createConnectTransport({ baseUrl, interceptors, useBinaryFormat: true }),
    close: () => void 0
  };
}

// clients/typescript/src/gen/threadline/v1/deferred_pb.ts
var file_threadline_v1_deferred = /* @__PURE__ */ fileDesc("Chx0aHJlYWRsaW5lL3YxL2RlZmVycmVkLnByb3RvEg10aHJlYWRsaW5lLnYxInoKFERlZmVycmVkVG9vbFJlcXVlc3RzEi4KBWNhbGxzGAEgAygLMh8udGhyZWFkbGluZS52MS5EZWZlcnJlZFRvb2xDYWxsEjIKCWFwcHJvdmFscxgCIAMoCzIfLnRocmVhZGxpbmUudjEuRGVmZXJyZWRUb29sQ2FsbCLVAQoQRGVmZXJyZWRUb29sQ2FsbBIUCgx0b29sX2NhbGxfaWQYASABKAkSEQoJdG9vbF9uYW1lGAIgASgJEhEKCWFyZ3NfanNvbhgDIAEoCRIXCg90YXJnZXRfaWRlbnRpdHkYBCABKAkSKQoEa2luZBgFIAEoDjIbLnRocmVhZGxpbmUudjEuRGVmZXJyZWRLaW5kEhUKDW1ldGFkYXRhX2pzb24YBiABKAkSKgoFY2hpbGQYByABKAsyGy50aHJlYWRsaW5lLnYxLkNoaWxkUmVxdWVzdCLnAQoMQ2hpbGRSZXF1ZXN0EioKBmFjdGlvbhgBIAEoDjIaLnRocmVhZGxpbmUudjEuQ2hpbGRBY3Rpb24SFQoNc3ViYWdlbnRfbmFtZRgCIAEoCRINCgVhZ2VudBgDIAEoCRIbChNjaGlsZF9kZWZpbml0aW9uX2lkGAQgASgJEhEKCXRocmVhZF9pZBgFIAEoCRINCgVpbnB1dBgGIAEoCRIrCgZwYXJlbnQYByABKAsyGy50aHJlYWRsaW5lLnYxLkNoaWxkTGluZWFnZRIZChF1c2FnZV9saW1pdHNfanNvbhgIIAEoCSLCAQoMQ2hpbGRMaW5lYWdlEhgKEHBhcmVudF90aHJlYWRfaWQYASABKAkSFQoNcGFyZW50X3J1bl9pZBgCIAEoCRIbChNwYXJlbnRfdG9vbF9jYWxsX2lkGAMgASgJEiAKGHBhcmVudF9hZ2VudF9pbnN0YW5jZV9pZBgEIAEoCRIVCg1zdWJhZ2VudF9uYW1lGAUgASgJEhUKDWRlbGVnYXRpb25faWQYBiABKAkSFAoMcGFyZW50X2FnZW50GAcgASgJInEKE0RlZmVycmVkVG9vbFJlc3VsdHMSKAoFY2FsbHMYASADKAsyGS50aHJlYWRsaW5lLnYxLkNhbGxSZXN1bHQSMAoJYXBwcm92YWxzGAIgAygLMh0udGhyZWFkbGluZS52MS5BcHByb3ZhbFJlc3VsdCKKAgoKQ2FsbFJlc3VsdBIUCgx0b29sX2NhbGxfaWQYASABKAkSFAoKdmFsdWVfanNvbhgCIAEoCUgAEjYKC3Rvb2xfcmV0dXJuGAMgASgLMh8udGhyZWFkbGluZS52MS5Ub29sUmV0dXJuUmVzdWx0SAASMQoGZmFpbGVkGAQgASgLMh8udGhyZWFkbGluZS52MS5Ub29sRmFpbGVkUmVzdWx0SAASLwoFcmV0cnkYBSABKAsyHi50aHJlYWRsaW5lLnYxLlRvb2xSZXRyeVJlc3VsdEgAEhUKDW1ldGFkYXRhX2pzb24YBiABKAkSEwoLYW5zd2VyZWRfYnkYByABKAlCCAoGcmVzdWx0IloKEFRvb2xSZXR1cm5SZXN1bHQSGQoRcmV0dXJuX3ZhbHVlX2pzb24YASABKAkSFAoMY29udGVudF9qc29uGAIgASgJEhUKDW1ldGFkYXRhX2pzb24YAyABKAkiIwoQVG9vbEZhaWxlZFJlc3VsdBIPCgdtZXNzYWdlGAEgASgJIiIKD1Rvb2xSZXRyeVJlc3VsdBIPCgdtZXNzYWdlGAEgASgJIrwBCg5BcHByb3ZhbFJlc3VsdBIUCgx0b29sX2NhbGxfaWQYASABKAkSLwoIYXBwcm92ZWQYAiABKAsyGy50aHJlYWRsaW5lLnYxLlRvb2xBcHByb3ZlZEgAEisKBmRlbmllZBgDIAEoCzIZLnRocmVhZGxpbmUudjEuVG9vbERlbmllZEgAEhUKDW1ldGFkYXRhX2pzb24YBCABKAkSEwoLYW5zd2VyZWRfYnkYBSABKAlCCgoIZGVjaXNpb24iRgoMVG9vbEFwcHJvdmVkEh8KEm92ZXJyaWRlX2FyZ3NfanNvbhgBIAEoCUgAiAEBQhUKE19vdmVycmlkZV9hcmdzX2pzb24iHQoKVG9vbERlbmllZBIPCgdtZXNzYWdlGAEgASgJIpIBChJEZWZlcnJlZFRvb2xSZXN1bWUSNQoIcmVxdWVzdHMYASABKAsyIy50aHJlYWRsaW5lLnYxLkRlZmVycmVkVG9vbFJlcXVlc3RzEjMKB3Jlc3VsdHMYAiABKAsyIi50aHJlYWRsaW5lLnYxLkRlZmVycmVkVG9vbFJlc3VsdHMSEAoIcmVjb3ZlcnkYAyABKAgqXgoLQ2hpbGRBY3Rpb24SHAoYQ0hJTERfQUNUSU9OX1VOU1BFQ0lGSUVEEAASFgoSQ0hJTERfQUNUSU9OX1NUQVJUEAESGQoVQ0hJTERfQUNUSU9OX0NPTlRJTlVFEAIqgQEKDERlZmVycmVkS2luZBIdChlERUZFUlJFRF9LSU5EX1VOU1BFQ0lGSUVEEAASGgoWREVGRVJSRURfS0lORF9BUFBST1ZBTBABEhoKFkRFRkVSUkVEX0tJTkRfRVhURVJOQUwQAhIaChZERUZFUlJFRF9LSU5EX1FVRVNUSU9OEANCqwEKEWRldi50aHJlYWRsaW5lLnYxQg1EZWZlcnJlZFByb3RvUAFaTmdpdGh1Yi5jb20vdGhyZWFkbGluZS1kZXYvdGhyZWFkbGluZS9jbGllbnRzL2dvL2dlbi90aHJlYWRsaW5lL3YxO3RocmVhZGxpbmV2MaICA1RMTqoCDVRocmVhZGxpbmUuVjHKAg1UaHJlYWRsaW5lXFYx6gIOVGhyZWFkbGluZTo6VjFiBnByb3RvMw");
var DeferredToolResultsSchema = /* @__PURE__ */ messageDesc(file_threadline_v1_deferred, 4);
var CallResultSchema = /* @__PURE__ */ messageDesc(file_threadline_v1_deferred, 5);
var ApprovalResultSchema = /* @__PURE__ */ messageDesc(file_threadline_v1_deferred, 9);

// clients/typescript/src/gen/threadline/v1/state_pb.ts
var file_threadline_v1_state = /* @__PURE__ */ fileDesc("Chl0aHJlYWRsaW5lL3YxL3N0YXRlLnByb3RvEg10aHJlYWRsaW5lLnYxIqUCCgxIYXJuZXNzU3RhdGUSFgoOc2NoZW1hX3ZlcnNpb24YASABKAkSEQoJdGhyZWFkX2lkGAIgASgJEjYKD21lc3NhZ2VfaGlzdG9yeRgDIAEoCzIdLnRocmVhZGxpbmUudjEuTWVzc2FnZUhpc3RvcnkSOQoRY2FwYWJpbGl0eV9zdGF0ZXMYBCADKAsyHi50aHJlYWRsaW5lLnYxLkNhcGFiaWxpdHlTdGF0ZRI7ChJlbnZpcm9ubWVudF9zdGF0ZXMYBSADKAsyHy50aHJlYWRsaW5lLnYxLkVudmlyb25tZW50U3RhdGUSJgoEcmVmcxgGIAMoCzIYLnRocmVhZGxpbmUudjEuU3RvcmVkUmVmEhIKCmV4dHJhX2pzb24YByABKAkibQoOTWVzc2FnZUhpc3RvcnkSDgoGZm9ybWF0GAEgASgJEhYKDmZvcm1hdF92ZXJzaW9uGAIgASgJEgwKBGRhdGEYAyABKAkSFQoNbWVzc2FnZV9jb3VudBgEIAEoAxIOCgZzaGEyNTYYBSABKAwiTAoPQ2FwYWJpbGl0eVN0YXRlEhUKDWNhcGFiaWxpdHlfaWQYASABKAkSDwoHdmVyc2lvbhgCIAEoCRIRCglkYXRhX2pzb24YAyABKAkiZwoQRW52aXJvbm1lbnRTdGF0ZRISCgptb3VudF9uYW1lGAEgASgJEhQKDHByb3ZpZGVyX2tleRgCIAEoCRIVCg1zdGF0ZV92ZXJzaW9uGAMgASgJEhIKCnN0YXRlX2pzb24YBCABKAkiNgoJU3RvcmVkUmVmEgsKA2tleRgBIAEoCRIOCgZkaWdlc3QYAiABKAkSDAoEc2l6ZRgDIAEoA0KoAQoRZGV2LnRocmVhZGxpbmUudjFCClN0YXRlUHJvdG9QAVpOZ2l0aHViLmNvbS90aHJlYWRsaW5lLWRldi90aHJlYWRsaW5lL2NsaWVudHMvZ28vZ2VuL3RocmVhZGxpbmUvdjE7dGhyZWFkbGluZXYxogIDVExOqgINVGhyZWFkbGluZS5WMcoCDVRocmVhZGxpbmVcVjHqAg5UaHJlYWRsaW5lOjpWMWIGcHJvdG8z");

// clients/typescript/src/gen/threadline/v1/run_pb.ts
var file_threadline_v1_run = /* @__PURE__ */ fileDesc("Chd0aHJlYWRsaW5lL3YxL3J1bi5wcm90bxINdGhyZWFkbGluZS52MSKwBAoHUnVuU3BlYxINCgVhZ2VudBgBIAEoCRIOCgR0ZXh0GAIgASgJSAASKwoFcGFydHMYAyABKAsyGi50aHJlYWRsaW5lLnYxLlByb21wdFBhcnRzSAASMwoOcHJldmlvdXNfc3RhdGUYBCABKAsyGy50aHJlYWRsaW5lLnYxLkhhcm5lc3NTdGF0ZRI6Cg9kZWZlcnJlZF9yZXN1bWUYBSABKAsyIS50aHJlYWRsaW5lLnYxLkRlZmVycmVkVG9vbFJlc3VtZRIyCg10b29sX3JlY292ZXJ5GAYgASgOMhsudGhyZWFkbGluZS52MS5Ub29sUmVjb3ZlcnkSLwoMY2xpZW50X3Rvb2xzGAcgAygLMhkudGhyZWFkbGluZS52MS5DbGllbnRUb29sEhMKC2NoZWNrcG9pbnRzGAggASgIEhIKCnJlcXVlc3RfaWQYCSABKAkSMAoMdXNhZ2VfbGltaXRzGAogASgLMhoudGhyZWFkbGluZS52MS5Vc2FnZUxpbWl0cxI2Cg9jaGVja3BvaW50X2Zvcm0YCyABKA4yHS50aHJlYWRsaW5lLnYxLkNoZWNrcG9pbnRGb3JtEiwKB2xpbmVhZ2UYDCABKAsyGy50aHJlYWRsaW5lLnYxLkNoaWxkTGluZWFnZRI4Cg5kZWZlcnJlZF90b29scxgNIAEoDjIgLnRocmVhZGxpbmUudjEuRGVmZXJyZWRUb29sc01vZGVCCAoGcHJvbXB0IjcKC1Byb21wdFBhcnRzEigKBXBhcnRzGAEgAygLMhkudGhyZWFkbGluZS52MS5Qcm9tcHRQYXJ0IoEBCgpQcm9tcHRQYXJ0Eg4KBHRleHQYASABKAlIABIuCgZiaW5hcnkYAiABKAsyHC50aHJlYWRsaW5lLnYxLkJpbmFyeUNvbnRlbnRIABIoCgN1cmwYAyABKAsyGS50aHJlYWRsaW5lLnYxLlVybENvbnRlbnRIAEIJCgdjb250ZW50IjEKDUJpbmFyeUNvbnRlbnQSEgoKbWVkaWFfdHlwZRgBIAEoCRIMCgRkYXRhGAIgASgMIlMKClVybENvbnRlbnQSJAoEa2luZBgBIAEoDjIWLnRocmVhZGxpbmUudjEuVXJsS2luZBILCgN1cmwYAiABKAkSEgoKbWVkaWFfdHlwZRgDIAEoCSJPCgpDbGllbnRUb29sEgwKBG5hbWUYASABKAkSEwoLZGVzY3JpcHRpb24YAiABKAkSHgoWcGFyYW1ldGVyc19qc29uX3NjaGVtYRgDIAEoCSKzAwoLVXNhZ2VMaW1pdHMSGgoNcmVxdWVzdF9saW1pdBgBIAEoA0gAiAEBEh0KEHRvb2xfY2FsbHNfbGltaXQYAiABKANIAYgBARIfChJpbnB1dF90b2tlbnNfbGltaXQYAyABKANIAogBARIgChNvdXRwdXRfdG9rZW5zX2xpbWl0GAQgASgDSAOIAQESHwoSdG90YWxfdG9rZW5zX2xpbWl0GAUgASgDSASIAQESKwoecGVyX3JlcXVlc3RfaW5wdXRfdG9rZW5zX2xpbWl0GAYgASgDSAWIAQESKAobY291bnRfdG9rZW5zX2JlZm9yZV9yZXF1ZXN0GAcgASgISAaIAQFCEAoOX3JlcXVlc3RfbGltaXRCEwoRX3Rvb2xfY2FsbHNfbGltaXRCFQoTX2lucHV0X3Rva2Vuc19saW1pdEIWChRfb3V0cHV0X3Rva2Vuc19saW1pdEIVChNfdG90YWxfdG9rZW5zX2xpbWl0QiEKH19wZXJfcmVxdWVzdF9pbnB1dF90b2tlbnNfbGltaXRCHgocX2NvdW50X3Rva2Vuc19iZWZvcmVfcmVxdWVzdCKZAwoJUnVuUmVzdWx0EigKBnN0YXR1cxgBIAEoDjIYLnRocmVhZGxpbmUudjEuUnVuU3RhdHVzEhEKCXRocmVhZF9pZBgCIAEoCRIOCgZydW5faWQYAyABKAkSEgoKcmVxdWVzdF9pZBgEIAEoCRIqCgVzdGF0ZRgFIAEoCzIbLnRocmVhZGxpbmUudjEuSGFybmVzc1N0YXRlEjUKCGRlZmVycmVkGAYgASgLMiMudGhyZWFkbGluZS52MS5EZWZlcnJlZFRvb2xSZXF1ZXN0cxI0Cg5zdXNwZW5kX3JlYXNvbhgHIAEoDjIcLnRocmVhZGxpbmUudjEuU3VzcGVuZFJlYXNvbhITCgtvdXRwdXRfanNvbhgIIAEoCRImCgV1c2FnZRgJIAEoCzIXLnRocmVhZGxpbmUudjEuUnVuVXNhZ2USJwoHZmFpbHVyZRgKIAEoCzIWLnRocmVhZGxpbmUudjEuRmFpbHVyZRIsCgdsaW5lYWdlGAsgASgLMhsudGhyZWFkbGluZS52MS5DaGlsZExpbmVhZ2UinQMKCFJ1blVzYWdlEhAKCHJlcXVlc3RzGAEgASgDEhIKCnRvb2xfY2FsbHMYAiABKAMSFAoMaW5wdXRfdG9rZW5zGAMgASgDEhoKEmNhY2hlX3dyaXRlX3Rva2VucxgEIAEoAxIdChVjYWNoZV93cml0ZV8xaF90b2tlbnMYBSABKAMSGQoRY2FjaGVfcmVhZF90b2tlbnMYBiABKAMSFQoNb3V0cHV0X3Rva2VucxgHIAEoAxIbChN1bm1lYXN1cmVkX3JlcXVlc3RzGAggASgDEh8KF291dHB1dF9yZWFzb25pbmdfdG9rZW5zGAkgASgDEhoKEmlucHV0X2F1ZGlvX3Rva2VucxgKIAEoAxIfChdjYWNoZV9hdWRpb19yZWFkX3Rva2VucxgLIAEoAxIbChNvdXRwdXRfYXVkaW9fdG9rZW5zGAwgASgDEhUKDWF1ZGlvX3NlY29uZHMYDSABKAESKwoHZGV0YWlscxgOIAMoCzIaLnRocmVhZGxpbmUudjEuVXNhZ2VEZXRhaWwSDAoEY29zdBgPIAEoCSIqCgtVc2FnZURldGFpbBIMCgRuYW1lGAEgASgJEg0KBXZhbHVlGAIgASgDImwKB0ZhaWx1cmUSDAoEY29kZRgBIAEoCRIPCgdtZXNzYWdlGAIgASgJEhQKDGRldGFpbHNfanNvbhgDIAEoCRIsCgpyZXRyeV9oaW50GAQgASgOMhgudGhyZWFkbGluZS52MS5SZXRyeUhpbnQqgAEKEURlZmVycmVkVG9vbHNNb2RlEiMKH0RFRkVSUkVEX1RPT0xTX01PREVfVU5TUEVDSUZJRUQQABIhCh1ERUZFUlJFRF9UT09MU19NT0RFX1NVUFBPUlRFRBABEiMKH0RFRkVSUkVEX1RPT0xTX01PREVfVU5TVVBQT1JURUQQAipmCg5DaGVja3BvaW50Rm9ybRIfChtDSEVDS1BPSU5UX0ZPUk1fVU5TUEVDSUZJRUQQABIYChRDSEVDS1BPSU5UX0ZPUk1fRlVMTBABEhkKFUNIRUNLUE9JTlRfRk9STV9ERUxUQRACKnYKB1VybEtpbmQSGAoUVVJMX0tJTkRfVU5TUEVDSUZJRUQQABISCg5VUkxfS0lORF9JTUFHRRABEhIKDlVSTF9LSU5EX0FVRElPEAISEgoOVVJMX0tJTkRfVklERU8QAxIVChFVUkxfS0lORF9ET0NVTUVOVBAEKnwKDFRvb2xSZWNvdmVyeRIdChlUT09MX1JFQ09WRVJZX1VOU1BFQ0lGSUVEEAASGgoWVE9PTF9SRUNPVkVSWV9ERUNMQVJFRBABEhcKE1RPT0xfUkVDT1ZFUllfTkVWRVIQAhIYChRUT09MX1JFQ09WRVJZX0FMV0FZUxADKowBCglSdW5TdGF0dXMSGgoWUlVOX1NUQVRVU19VTlNQRUNJRklFRBAAEhgKFFJVTl9TVEFUVVNfQ09NUExFVEVEEAESGAoUUlVOX1NUQVRVU19TVVNQRU5ERUQQAhIVChFSVU5fU1RBVFVTX0ZBSUxFRBADEhgKFFJVTl9TVEFUVVNfQ0FOQ0VMTEVEEAQqTAoNU3VzcGVuZFJlYXNvbhIeChpTVVNQRU5EX1JFQVNPTl9VTlNQRUNJRklFRBAAEhsKF1NVU1BFTkRfUkVBU09OX0RFRkVSUkVEEAEqdgoJUmV0cnlIaW50EhoKFlJFVFJZX0hJTlRfVU5TUEVDSUZJRUQQABITCg9SRVRSWV9ISU5UX05PTkUQARIWChJSRVRSWV9ISU5UX05FV19SVU4QAhIgChxSRVRSWV9ISU5UX0RFUEVOREVOQ1lfQ0hBTkdFEANCpgEKEWRldi50aHJlYWRsaW5lLnYxQghSdW5Qcm90b1ABWk5naXRodWIuY29tL3RocmVhZGxpbmUtZGV2L3RocmVhZGxpbmUvY2xpZW50cy9nby9nZW4vdGhyZWFkbGluZS92MTt0aHJlYWRsaW5ldjGiAgNUTE6qAg1UaHJlYWRsaW5lLlYxygINVGhyZWFkbGluZVxWMeoCDlRocmVhZGxpbmU6OlYxYgZwcm90bzM", [file_threadline_v1_deferred, file_threadline_v1_state]);
var RunSpecSchema = /* @__PURE__ */ messageDesc(file_threadline_v1_run, 0);
var RunStatus = /* @__PURE__ */ ((RunStatus2) => {
  RunStatus2[RunStatus2["UNSPECIFIED"] = 0] = "UNSPECIFIED";
  RunStatus2[RunStatus2["COMPLETED"] = 1] = "COMPLETED";
  RunStatus2[RunStatus2["SUSPENDED"] = 2] = "SUSPENDED";
  RunStatus2[RunStatus2["FAILED"] = 3] = "FAILED";
  RunStatus2[RunStatus2["CANCELLED"] = 4] = "CANCELLED";
  return RunStatus2;
})(RunStatus || {});

// clients/typescript/src/gen/threadline/v1/thread_pb.ts
var file_threadline_v1_thread = /* @__PURE__ */ fileDesc("Chp0aHJlYWRsaW5lL3YxL3RocmVhZC5wcm90bxINdGhyZWFkbGluZS52MSL6AwoGVGhyZWFkEhEKCXRocmVhZF9pZBgBIAEoCRINCgVhZ2VudBgCIAEoCRIxCgZsYWJlbHMYAyADKAsyIS50aHJlYWRsaW5lLnYxLlRocmVhZC5MYWJlbHNFbnRyeRIvCgtjcmVhdGVfdGltZRgEIAEoCzIaLmdvb2dsZS5wcm90b2J1Zi5UaW1lc3RhbXASLwoLdXBkYXRlX3RpbWUYBSABKAsyGi5nb29nbGUucHJvdG9idWYuVGltZXN0YW1wEhAKCHJldmlzaW9uGAYgASgDEisKBnN0YXR1cxgHIAEoDjIbLnRocmVhZGxpbmUudjEuVGhyZWFkU3RhdHVzEicKBGhlYWQYCCABKAsyGS50aHJlYWRsaW5lLnYxLkNoZWNrcG9pbnQSNAoHcGVuZGluZxgJIAEoCzIjLnRocmVhZGxpbmUudjEuRGVmZXJyZWRUb29sUmVxdWVzdHMSGAoQcmVjb3ZlcnlfcGVuZGluZxgKIAEoCBIpCgVsZWFzZRgLIAEoCzIaLnRocmVhZGxpbmUudjEuVGhyZWFkTGVhc2USJwoFcXVldWUYDCADKAsyGC50aHJlYWRsaW5lLnYxLlF1ZXVlZFJ1bhotCgtMYWJlbHNFbnRyeRILCgNrZXkYASABKAkSDQoFdmFsdWUYAiABKAk6AjgBIowBCglRdWV1ZWRSdW4SEgoKcmVxdWVzdF9pZBgBIAEoCRIOCgZydW5faWQYAiABKAkSKgoEa2luZBgDIAEoDjIcLnRocmVhZGxpbmUudjEuUXVldWVkUnVuS2luZBIvCgtjcmVhdGVfdGltZRgEIAEoCzIaLmdvb2dsZS5wcm90b2J1Zi5UaW1lc3RhbXAiYgoLVGhyZWFkTGVhc2USDgoGcnVuX2lkGAEgASgJEhIKCnJlcXVlc3RfaWQYAiABKAkSLwoLZXhwaXJlX3RpbWUYAyABKAsyGi5nb29nbGUucHJvdG9idWYuVGltZXN0YW1wIvwCCgpDaGVja3BvaW50EhEKCXRocmVhZF9pZBgBIAEoCRIQCghyZXZpc2lvbhgCIAEoAxIrCgRraW5kGAMgASgOMh0udGhyZWFkbGluZS52MS5DaGVja3BvaW50S2luZBIOCgZydW5faWQYBCABKAkSEgoKcmVxdWVzdF9pZBgFIAEoCRIvCgtjcmVhdGVfdGltZRgGIAEoCzIaLmdvb2dsZS5wcm90b2J1Zi5UaW1lc3RhbXASKgoFc3RhdGUYByABKAsyGy50aHJlYWRsaW5lLnYxLkhhcm5lc3NTdGF0ZRI0CgdwZW5kaW5nGAggASgLMiMudGhyZWFkbGluZS52MS5EZWZlcnJlZFRvb2xSZXF1ZXN0cxI0CglyZW1haW5pbmcYCSABKAsyIS50aHJlYWRsaW5lLnYxLkRlZmVycmVkVG9vbFJlc3VtZRIvCgxjbGllbnRfdG9vbHMYCiADKAsyGS50aHJlYWRsaW5lLnYxLkNsaWVudFRvb2wqkgEKDVF1ZXVlZFJ1bktpbmQSHwobUVVFVUVEX1JVTl9LSU5EX1VOU1BFQ0lGSUVEEAASHAoYUVVFVUVEX1JVTl9LSU5EX0VOUVVFVUVEEAESIAocUVVFVUVEX1JVTl9LSU5EX0lOVEVSUlVQVElORxACEiAKHFFVRVVFRF9SVU5fS0lORF9ST0xMSU5HX0JBQ0sQAyp9CgxUaHJlYWRTdGF0dXMSHQoZVEhSRUFEX1NUQVRVU19VTlNQRUNJRklFRBAAEhYKElRIUkVBRF9TVEFUVVNfSURMRRABEhkKFVRIUkVBRF9TVEFUVVNfUlVOTklORxACEhsKF1RIUkVBRF9TVEFUVVNfU1VTUEVOREVEEAMqvwIKDkNoZWNrcG9pbnRLaW5kEh8KG0NIRUNLUE9JTlRfS0lORF9VTlNQRUNJRklFRBAAEhsKF0NIRUNLUE9JTlRfS0lORF9DUkVBVEVEEAESHAoYQ0hFQ0tQT0lOVF9LSU5EX0lNUE9SVEVEEAISGgoWQ0hFQ0tQT0lOVF9LSU5EX0ZPUktFRBADEhsKF0NIRUNLUE9JTlRfS0lORF9NSURfUlVOEAQSHQoZQ0hFQ0tQT0lOVF9LSU5EX0NPTVBMRVRFRBAFEh0KGUNIRUNLUE9JTlRfS0lORF9TVVNQRU5ERUQQBhIaChZDSEVDS1BPSU5UX0tJTkRfRkFJTEVEEAcSHQoZQ0hFQ0tQT0lOVF9LSU5EX0NBTkNFTExFRBAIEh8KG0NIRUNLUE9JTlRfS0lORF9ST0xMRURfQkFDSxAJKrICCg9UaHJlYWRSdW5TdGF0dXMSIQodVEhSRUFEX1JVTl9TVEFUVVNfVU5TUEVDSUZJRUQQABIdChlUSFJFQURfUlVOX1NUQVRVU19SVU5OSU5HEAESHwobVEhSRUFEX1JVTl9TVEFUVVNfQ09NUExFVEVEEAISHwobVEhSRUFEX1JVTl9TVEFUVVNfU1VTUEVOREVEEAMSHAoYVEhSRUFEX1JVTl9TVEFUVVNfRkFJTEVEEAQSHwobVEhSRUFEX1JVTl9TVEFUVVNfQ0FOQ0VMTEVEEAUSGwoXVEhSRUFEX1JVTl9TVEFUVVNfRVJST1IQBhIhCh1USFJFQURfUlVOX1NUQVRVU19JTlRFUlJVUFRFRBAHEhwKGFRIUkVBRF9SVU5fU1RBVFVTX1FVRVVFRBAIQqkBChFkZXYudGhyZWFkbGluZS52MUILVGhyZWFkUHJvdG9QAVpOZ2l0aHViLmNvbS90aHJlYWRsaW5lLWRldi90aHJlYWRsaW5lL2NsaWVudHMvZ28vZ2VuL3RocmVhZGxpbmUvdjE7dGhyZWFkbGluZXYxogIDVExOqgINVGhyZWFkbGluZS5WMcoCDVRocmVhZGxpbmVcVjHqAg5UaHJlYWRsaW5lOjpWMWIGcHJvdG8z", [file_google_protobuf_timestamp, file_threadline_v1_deferred, file_threadline_v1_run, file_threadline_v1_state]);
var ThreadStatus = /* @__PURE__ */ ((ThreadStatus2) => {
  ThreadStatus2[ThreadStatus2["UNSPECIFIED"] = 0] = "UNSPECIFIED";
  ThreadStatus2[ThreadStatus2["IDLE"] = 1] = "IDLE";
  ThreadStatus2[ThreadStatus2["RUNNING"] = 2] = "RUNNING";
  ThreadStatus2[ThreadStatus2["SUSPENDED"] = 3] = "SUSPENDED";
  return ThreadStatus2;
})(ThreadStatus || {});
var CheckpointKind = /* @__PURE__ */ ((CheckpointKind2) => {
  CheckpointKind2[CheckpointKind2["UNSPECIFIED"] = 0] = "UNSPECIFIED";
  CheckpointKind2[CheckpointKind2["CREATED"] = 1] = "CREATED";
  CheckpointKind2[CheckpointKind2["IMPORTED"] = 2] = "IMPORTED";
  CheckpointKind2[CheckpointKind2["FORKED"] = 3] = "FORKED";
  CheckpointKind2[CheckpointKind2["MID_RUN"] = 4] = "MID_RUN";
  CheckpointKind2[CheckpointKind2["COMPLETED"] = 5] = "COMPLETED";
  CheckpointKind2[CheckpointKind2["SUSPENDED"] = 6] = "SUSPENDED";
  CheckpointKind2[CheckpointKind2["FAILED"] = 7] = "FAILED";
  CheckpointKind2[CheckpointKind2["CANCELLED"] = 8] = "CANCELLED";
  CheckpointKind2[CheckpointKind2["ROLLED_BACK"] = 9] = "ROLLED_BACK";
  return CheckpointKind2;
})(CheckpointKind || {});
var ThreadRunStatus = /* @__PURE__ */ ((ThreadRunStatus2) => {
  ThreadRunStatus2[ThreadRunStatus2["UNSPECIFIED"] = 0] = "UNSPECIFIED";
  ThreadRunStatus2[ThreadRunStatus2["RUNNING"] = 1] = "RUNNING";
  ThreadRunStatus2[ThreadRunStatus2["COMPLETED"] = 2] = "COMPLETED";
  ThreadRunStatus2[ThreadRunStatus2["SUSPENDED"] = 3] = "SUSPENDED";
  ThreadRunStatus2[ThreadRunStatus2["FAILED"] = 4] = "FAILED";
  ThreadRunStatus2[ThreadRunStatus2["CANCELLED"] = 5] = "CANCELLED";
  ThreadRunStatus2[ThreadRunStatus2["ERROR"] = 6] = "ERROR";
  ThreadRunStatus2[ThreadRunStatus2["INTERRUPTED"] = 7] = "INTERRUPTED";
  ThreadRunStatus2[ThreadRunStatus2["QUEUED"] = 8] = "QUEUED";
  return ThreadRunStatus2;
})(ThreadRunStatus || {});

// clients/typescript/src/googleapis/google/rpc/error_details_pb.ts
var file_google_rpc_error_details = /* @__PURE__ */ fileDesc("Ch5nb29nbGUvcnBjL2Vycm9yX2RldGFpbHMucHJvdG8SCmdvb2dsZS5ycGMikwEKCUVycm9ySW5mbxIOCgZyZWFzb24YASABKAkSDgoGZG9tYWluGAIgASgJEjUKCG1ldGFkYXRhGAMgAygLMiMuZ29vZ2xlLnJwYy5FcnJvckluZm8uTWV0YWRhdGFFbnRyeRovCg1NZXRhZGF0YUVudHJ5EgsKA2tleRgBIAEoCRINCgV2YWx1ZRgCIAEoCToCOAEiOwoJUmV0cnlJbmZvEi4KC3JldHJ5X2RlbGF5GAEgASgLMhkuZ29vZ2xlLnByb3RvYnVmLkR1cmF0aW9uIjIKCURlYnVnSW5mbxIVCg1zdGFja19lbnRyaWVzGAEgAygJEg4KBmRldGFpbBgCIAEoCSKPAwoMUXVvdGFGYWlsdXJlEjYKCnZpb2xhdGlvbnMYASADKAsyIi5nb29nbGUucnBjLlF1b3RhRmFpbHVyZS5WaW9sYXRpb24axgIKCVZpb2xhdGlvbhIPCgdzdWJqZWN0GAEgASgJEhMKC2Rlc2NyaXB0aW9uGAIgASgJEhMKC2FwaV9zZXJ2aWNlGAMgASgJEhQKDHF1b3RhX21ldHJpYxgEIAEoCRIQCghxdW90YV9pZBgFIAEoCRJRChBxdW90YV9kaW1lbnNpb25zGAYgAygLMjcuZ29vZ2xlLnJwYy5RdW90YUZhaWx1cmUuVmlvbGF0aW9uLlF1b3RhRGltZW5zaW9uc0VudHJ5EhMKC3F1b3RhX3ZhbHVlGAcgASgDEh8KEmZ1dHVyZV9xdW90YV92YWx1ZRgIIAEoA0gAiAEBGjYKFFF1b3RhRGltZW5zaW9uc0VudHJ5EgsKA2tleRgBIAEoCRINCgV2YWx1ZRgCIAEoCToCOAFCFQoTX2Z1dHVyZV9xdW90YV92YWx1ZSKVAQoTUHJlY29uZGl0aW9uRmFpbHVyZRI9Cgp2aW9sYXRpb25zGAEgAygLMikuZ29vZ2xlLnJwYy5QcmVjb25kaXRpb25GYWlsdXJlLlZpb2xhdGlvbho/CglWaW9sYXRpb24SDAoEdHlwZRgBIAEoCRIPCgdzdWJqZWN0GAIgASgJEhMKC2Rlc2NyaXB0aW9uGAMgASgJIswBCgpCYWRSZXF1ZXN0Ej8KEGZpZWxkX3Zpb2xhdGlvbnMYASADKAsyJS5nb29nbGUucnBjLkJhZFJlcXVlc3QuRmllbGRWaW9sYXRpb24afQoORmllbGRWaW9sYXRpb24SDQoFZmllbGQYASABKAkSEwoLZGVzY3JpcHRpb24YAiABKAkSDgoGcmVhc29uGAMgASgJEjcKEWxvY2FsaXplZF9tZXNzYWdlGAQgASgLMhwuZ29vZ2xlLnJwYy5Mb2NhbGl6ZWRNZXNzYWdlIjcKC1JlcXVlc3RJbmZvEhIKCnJlcXVlc3RfaWQYASABKAkSFAoMc2VydmluZ19kYXRhGAIgASgJImAKDFJlc291cmNlSW5mbxIVCg1yZXNvdXJjZV90eXBlGAEgASgJEhUKDXJlc291cmNlX25hbWUYAiABKAkSDQoFb3duZXIYAyABKAkSEwoLZGVzY3JpcHRpb24YBCABKAkiVgoESGVscBIkCgVsaW5rcxgBIAMoCzIVLmdvb2dsZS5ycGMuSGVscC5MaW5rGigKBExpbmsSEwoLZGVzY3JpcHRpb24YASABKAkSCwoDdXJsGAIgASgJIjMKEExvY2FsaXplZE1lc3NhZ2USDgoGbG9jYWxlGAEgASgJEg8KB21lc3NhZ2UYAiABKAlCbAoOY29tLmdvb2dsZS5ycGNCEUVycm9yRGV0YWlsc1Byb3RvUAFaP2dvb2dsZS5nb2xhbmcub3JnL2dlbnByb3RvL2dvb2dsZWFwaXMvcnBjL2VycmRldGFpbHM7ZXJyZGV0YWlsc6ICA1JQQ2IGcHJvdG8z", [file_google_protobuf_duration]);
var ErrorInfoSchema = /* @__PURE__ */ messageDesc(file_google_rpc_error_details, 0);
var BadRequestSchema = /* @__PURE__ */ messageDesc(file_google_rpc_error_details, 5);

// clients/typescript/src/errors.ts
var THREADLINE_ERROR_DOMAIN = "threadline";
var ThreadlineError = class _ThreadlineError extends Error {
  name = "ThreadlineError";
  /** The gRPC status code (`Code.FailedPrecondition`, …); `Code.Unknown` for non-RPC errors. */
  code;
  /** The ErrorInfo reason (`SCHEMA_VERSION_UNSUPPORTED`, …); empty when the status carried none. */
  reason;
  /** The ErrorInfo domain: "threadline" for the server's own errors; empty when there is none. */
  domain;
  /**
   * The ErrorInfo metadata, e.g. `{received: "2", supported: "1"}` for an unsupported schema
   * version. Empty when the status carried none.
   */
  metadata;
  /** Request fields at fault (`google.rpc.BadRequest`), in the server's order; often empty. */
  fieldViolations;
  /** The server's message without the code prefix. */
  rawMessage;
  /** The `ConnectError` this error was made from. */
  cause;
  /** Use `ThreadlineError.from`; subclasses pass the `ConnectError` they stand for. */
  constructor(cause) {
    const info = cause.findDetails(ErrorInfoSchema)[0];
    const reason = info?.reason ?? "";
    super(`[${codeName(cause.code)}${reason ? ` ${reason}` : ""}] ${cause.rawMessage}`);
    this.cause = cause;
    this.code = cause.code;
    this.reason = reason;
    this.domain = info?.domain ?? "";
    this.metadata = Object.freeze({ ...info?.metadata ?? {} });
    this.fieldViolations = Object.freeze(
      cause.findDetails(BadRequestSchema).flatMap((detail) => detail.fieldViolations).map((violation) => Object.freeze({ field: violation.field, description: violation.description }))
    );
    this.rawMessage = cause.rawMessage;
  }
  /**
   * Turn anything a call threw into a `ThreadlineError`.
   *
   * A `ThreadlineError` is returned as it is; a `ConnectError` keeps its code and details; an
   * `AbortError` becomes `Code.Canceled`; anything else becomes `Code.Unknown` with no reason.
   * A status whose ErrorInfo (domain "threadline") names one of `ThreadService`'s reasons becomes
   * that reason's subclass (`ThreadBusy`, `RevisionConflict`, …).
   */
  static from(reason) {
    if (reason instanceof _ThreadlineError) {
      return reason;
    }
    const cause = ConnectError.from(reason);
    const info = cause.findDetails(ErrorInfoSchema)[0];
    const kind = info?.domain === THREADLINE_ERROR_DOMAIN ? BY_REASON.get(info.reason) : void 0;
    return kind === void 0 ? new _ThreadlineError(cause) : new kind(cause);
  }
};
function codeName(code) {
  const name = Code[code];
  if (name === void 0) {
    return String(code);
  }
  return name.replace(/[A-Z]/g, (letter, index) => (index === 0 ? "" : "_") + letter.toLowerCase());
}
var ProtocolError = class extends ThreadlineError {
  name = "ProtocolError";
  /** @param message - What broke. */
  constructor(message) {
    super(new ConnectError(message, Code.Internal));
  }
};
var ReasonError = class extends ThreadlineError {
  /** @param cause - The `ConnectError` whose ErrorInfo carries the class's reason. */
  constructor(cause) {
    super(cause);
  }
};
function bigintEntry(metadata, key) {
  const text = metadata[key] ?? "";
  return /^-?\d+$/.test(text) ? BigInt(text) : 0n;
}
function numberEntry(metadata, key) {
  const value = Number(bigintEntry(metadata, key));
  return Number.isSafeInteger(value) ? value : 0;
}
var ThreadNotFound = class extends ReasonError {
  name = "ThreadNotFound";
  /** The ErrorInfo reason this class stands for. */
  static REASON = "THREAD_NOT_FOUND";
};
var CheckpointNotFound = class extends ReasonError {
  name = "CheckpointNotFound";
  /** The ErrorInfo reason this class stands for. */
  static REASON = "CHECKPOINT_NOT_FOUND";
};
var RunNotFound = class extends ReasonError {
  name = "RunNotFound";
  /** The ErrorInfo reason this class stands for. */
  static REASON = "RUN_NOT_FOUND";
};
var ThreadExists = class extends ReasonError {
  name = "ThreadExists";
  /** The ErrorInfo reason this class stands for. */
  static REASON = "THREAD_EXISTS";
};
var RequestIdReused = class extends ReasonError {
  name = "RequestIdReused";
  /** The ErrorInfo reason this class stands for. */
  static REASON = "REQUEST_ID_REUSED";
  /** The original request's run (its last attempt); "" when the server sent none. */
  get runId() {
    return this.metadata["run_id"] ?? "";
  }
  /** The last checkpoint the original request committed; 0n when it committed none (or not sent). */
  get revision() {
    return bigintEntry(this.metadata, "revision");
  }
  /**
   * The original request's record's status as the server names it (`completed`, `running`,
   * `queued`, `suspended`, `failed`, `cancelled`, …); "" when not sent.
   */
  get status() {
    return this.metadata["status"] ?? "";
  }
  /**
   * The parts in which this request differs from the original, in this order: `prompt`,
   * `answers`, `expected_revision`, `busy_strategy` (e.g. `["prompt"]`). Undefined when the server
   * cannot tell (`unknown`: the original's record was made by an older server, which kept no part
   * digests) or sent none (an older server).
   */
  get differs() {
    const text = this.metadata["differs"] ?? "";
    return text === "" || text === "unknown" ? void 0 : text.split(",");
  }
};
var ThreadNotSuspended = class extends ReasonError {
  name = "ThreadNotSuspended";
  /** The ErrorInfo reason this class stands for. */
  static REASON = "THREAD_NOT_SUSPENDED";
  /**
   * The request that last consumed a pending batch of the thread, and how; undefined when none did
   * (since a rollback restored one), when the server did not say (an older server, and the
   * `busyStrategy: "rollback"` refusals, which carry `began_at` instead), or when it names neither
   * `answers` nor `prompt`.
   */
  get answeredBy() {
    const requestId = this.metadata["request_id"] ?? "";
    const how = this.metadata["answered"] ?? "";
    if (requestId === "" || how !== "answers" && how !== "prompt") {
      return void 0;
    }
    return Object.freeze({
      requestId,
      revision: bigintEntry(this.metadata, "revision"),
      how,
      runRevision: bigintEntry(this.metadata, "run_revision"),
      matches: this.metadata["matches"] === "true"
    });
  }
};
var RequestInterrupted = class extends ReasonError {
  name = "RequestInterrupted";
  /** The ErrorInfo reason this class stands for. */
  static REASON = "REQUEST_INTERRUPTED";
  /** The interrupted run (its last attempt); "" when the server sent none. */
  get runId() {
    return this.metadata["run_id"] ?? "";
  }
  /** The last checkpoint the interrupted run committed; 0n when it committed none. */
  get revision() {
    return bigintEntry(this.metadata, "revision");
  }
  /**
   * How many attempts of a background request ended by a lost server when the attempt cap closed
   * it; 0 when the server sent none (a request superseded by another).
   */
  get attempts() {
    return numberEntry(this.metadata, "attempts");
  }
};
var ThreadBusy = class extends ReasonError {
  name = "ThreadBusy";
  /** The ErrorInfo reason this class stands for. */
  static REASON = "THREAD_BUSY";
  /** The run holding the thread (`threads.cancel` takes it); when only the queue holds it, the queue's head's run ID. */
  get runId() {
    return this.metadata["run_id"] ?? "";
  }
  /** The request that run serves (or the queue's head's, when only the queue holds the thread). */
  get requestId() {
    return this.metadata["request_id"] ?? "";
  }
  /**
   * When the holder's lease expires unless renewed, by the store's clock; undefined if not sent, and
   * when only the queue holds the thread (no lease).
   */
  get leaseExpiresAt() {
    const text = this.metadata["lease_expires_at"] ?? "";
    const time = text === "" ? Number.NaN : Date.parse(text);
    return Number.isNaN(time) ? void 0 : new Date(time);
  }
  /** How many requests wait in the thread's queue (`Thread.queue`); 0 when none (or not sent). */
  get queueLength() {
    return numberEntry(this.metadata, "queue_length");
  }
  /**
   * Whether the request this error names (the lease holder's, or the queue's head's when only the
   * queue holds the thread) is `requestId`: true when the thread is busy with that request itself
   * (e.g. one the host started with `startRun`, or a retry of its own request), so its outcome is
   * worth waiting for (`joinRun`, or the same request again later); false for another request, and
   * for an empty `requestId`.
   */
  isOwn(requestId) {
    return requestId !== "" && this.requestId === requestId;
  }
};
var ThreadQueueFull = class extends ReasonError {
  name = "ThreadQueueFull";
  /** The ErrorInfo reason this class stands for. */
  static REASON = "THREAD_QUEUE_FULL";
  /** The thread whose queue is full; "" when the server sent none. */
  get threadId() {
    return this.metadata["thread_id"] ?? "";
  }
  /** How many requests may wait in one thread's queue (`--max-queued-runs`); 0 when not sent. */
  get limit() {
    return numberEntry(this.metadata, "limit");
  }
  /** How many requests waited in it when the server refused this one; 0 when not sent. */
  get queueLength() {
    return numberEntry(this.metadata, "queue_length");
  }
};
var RevisionConflict = class extends ReasonError {
  name = "RevisionConflict";
  /** The ErrorInfo reason this class stands for. */
  static REASON = "REVISION_CONFLICT";
  /** The head's revision when the server checked; 0n when the server sent none. */
  get currentRevision() {
    return bigintEntry(this.metadata, "current_revision");
  }
};
var LeaseLost = class extends ReasonError {
  name = "LeaseLost";
  /** The ErrorInfo reason this class stands for. */
  static REASON = "LEASE_LOST";
};
var StoreUnavailable = class extends ReasonError {
  name = "StoreUnavailable";
  /** The ErrorInfo reason this class stands for. */
  static REASON = "STORE_UNAVAILABLE";
};
var ListenerTooSlow = class extends ReasonError {
  name = "ListenerTooSlow";
  /** The ErrorInfo reason this class stands for. */
  static REASON = "LISTENER_TOO_SLOW";
  /** The thread of the run; "" when the server sent none. */
  get threadId() {
    return this.metadata["thread_id"] ?? "";
  }
  /** The run that goes on (`threads.cancel` takes it). */
  get runId() {
    return this.metadata["run_id"] ?? "";
  }
  /** The request that run serves: send it again for the outcome. */
  get requestId() {
    return this.metadata["request_id"] ?? "";
  }
  /** How many events the server keeps for a caller that has not taken them; 0 when not sent. */
  get backlog() {
    return numberEntry(this.metadata, "backlog");
  }
};
function runStatusEntry(metadata, key) {
  const name = (metadata[key] ?? "").toUpperCase().replace(/^THREAD_RUN_STATUS_/, "");
  const value = ThreadRunStatus[name];
  return typeof value === "number" ? value : 0 /* UNSPECIFIED */;
}
var RunAttemptLost = class extends ReasonError {
  name = "RunAttemptLost";
  /** The ErrorInfo reason this class stands for. */
  static REASON = "RUN_ATTEMPT_LOST";
  /** The lost attempt; "" when the server sent none. */
  get runId() {
    return this.metadata["run_id"] ?? "";
  }
  /** The request it served. */
  get requestId() {
    return this.metadata["request_id"] ?? "";
  }
  /** The sequence of the attempt's last written event; 0n when not sent. */
  get lastSequence() {
    return bigintEntry(this.metadata, "last_sequence");
  }
  /** The request's status now (RUNNING when a next attempt runs it); UNSPECIFIED when not sent. */
  get requestStatus() {
    return runStatusEntry(this.metadata, "request_status");
  }
  /** The request's next attempt, once one runs; "" until then. */
  get nextRunId() {
    return this.metadata["next_run_id"] ?? "";
  }
};
var RunEventsExpired = class extends ReasonError {
  name = "RunEventsExpired";
  /** The ErrorInfo reason this class stands for. */
  static REASON = "RUN_EVENTS_EXPIRED";
  /** The attempt joined; "" when the server sent none. */
  get runId() {
    return this.metadata["run_id"] ?? "";
  }
  /** The request it served. */
  get requestId() {
    return this.metadata["request_id"] ?? "";
  }
  /** The request's status; UNSPECIFIED when not sent. */
  get requestStatus() {
    return runStatusEntry(this.metadata, "request_status");
  }
  /** The last checkpoint the request committed; 0n when none. */
  get revision() {
    return bigintEntry(this.metadata, "revision");
  }
  /** `retention` (the log expired) or `not_recorded` (it was never kept); "" when not sent. */
  get why() {
    return this.metadata["why"] ?? "";
  }
};
var FollowerLimitReached = class extends ReasonError {
  name = "FollowerLimitReached";
  /** The ErrorInfo reason this class stands for. */
  static REASON = "FOLLOWER_LIMIT_REACHED";
  /** The replica's `--max-followers`; 0 when not sent. */
  get limit() {
    return numberEntry(this.metadata, "limit");
  }
};
var BY_REASON = new Map(
  [
    ThreadNotFound,
    CheckpointNotFound,
    RunNotFound,
    ThreadExists,
    RequestIdReused,
    ThreadNotSuspended,
    RequestInterrupted,
    ThreadBusy,
    ThreadQueueFull,
    RevisionConflict,
    LeaseLost,
    StoreUnavailable,
    ListenerTooSlow,
    RunAttemptLost,
    RunEventsExpired,
    FollowerLimitReached
  ].map((kind) => [kind.REASON, kind])
);

// clients/typescript/src/calls.ts
var STREAM_WITHOUT_RESULT = "the stream ended without its terminal result";
function connectOptions(options, defaultTimeoutMs) {
  const timeoutMs = options?.timeoutMs ?? defaultTimeoutMs;
  const result = {};
  if (timeoutMs > 0) {
    result.timeoutMs = timeoutMs;
  }
  if (options?.signal !== void 0) {
    result.signal = options.signal;
  }
  if (options?.headers !== void 0) {
    result.headers = options.headers;
  }
  return result;
}
async function call(promise) {
  try {
    return await promise;
  } catch (err) {
    throw ThreadlineError.from(err);
  }
}
function required(value, what) {
  if (value === void 0) {
    throw missing(what);
  }
  return value;
}
function missing(what) {
  return new ProtocolError(`the server's response has no ${what}`);
}
async function* streamEvents(open, options, what, accept = () => {
}) {
  const controller = new AbortController();
  const { signal } = options;
  const forward = () => controller.abort(signal?.reason);
  if (signal?.aborted) {
    forward();
  } else {
    signal?.addEventListener("abort", forward, { once: true });
  }
  const responses = open({ ...options, signal: controller.signal })[Symbol.asyncIterator]();
  let finished = false;
  let sawResult = false;
  try {
    for (; ; ) {
      let next;
      try {
        next = await responses.next();
      } catch (err) {
        finished = true;
        throw ThreadlineError.from(err);
      }
      if (next.done === true) {
        finished = true;
        if (!sawResult) {
          throw new ProtocolError(STREAM_WITHOUT_RESULT);
        }
        return;
      }
      const { event, events } = next.value;
      const received = event !== void 0 ? [event] : events;
      if (received.length === 0) {
        throw missing(what);
      }
      for (const item of received) {
        if (controller.signal.aborted) {
          throw ThreadlineError.from(ConnectError.from(controller.signal.reason, Code.Canceled));
        }
        accept(item);
        sawResult ||= item.event.case === "result";
        yield item;
      }
    }
  } finally {
    signal?.removeEventListener("abort", forward);
    if (!finished) {
      controller.abort();
      try {
        while ((await responses.next()).done !== true) {
        }
      } catch {
      }
    }
  }
}
async function* serverStream(open, options) {
  const controller = new AbortController();
  const { signal } = options;
  const forward = () => controller.abort(signal?.reason);
  if (signal?.aborted) {
    forward();
  } else {
    signal?.addEventListener("abort", forward, { once: true });
  }
  const responses = open({ ...options, signal: controller.signal })[Symbol.asyncIterator]();
  let finished = false;
  try {
    for (; ; ) {
      let next;
      try {
        next = await responses.next();
      } catch (err) {
        finished = true;
        throw ThreadlineError.from(err);
      }
      if (next.done === true) {
        finished = true;
        return;
      }
      if (controller.signal.aborted) {
        throw ThreadlineError.from(ConnectError.from(controller.signal.reason, Code.Canceled));
      }
      yield next.value;
    }
  } finally {
    signal?.removeEventListener("abort", forward);
    if (!finished) {
      controller.abort();
      try {
        while ((await responses.next()).done !== true) {
        }
      } catch {
      }
    }
  }
}

// clients/typescript/node_modules/@noble/hashes/_u64.js
var fromNumH = (n) => n / 2 ** 32 | 0;
var fromNumL = (n) => n >>> 0;
function setU64FromNum(view, byteOffset, n, isLE) {
  const h2 = fromNumH(n);
  const l = fromNumL(n);
  view.setUint32(byteOffset, isLE ? l : h2, isLE);
  view.setUint32(byteOffset + 4, isLE ? h2 : l, isLE);
}

// clients/typescript/node_modules/@noble/hashes/utils.js
function isBytes(a) {
  return a instanceof Uint8Array || ArrayBuffer.isView(a) && a.constructor.name === "Uint8Array" && "BYTES_PER_ELEMENT" in a && a.BYTES_PER_ELEMENT === 1;
}
var atitle = (title) => title ? `"${title}" ` : "";
function anumber(n, title = "") {
  if (typeof n !== "number")
    throw new TypeError(atitle(title) + "expected number, got " + typeof n);
  if (!Number.isSafeInteger(n) || n < 0)
    throw new RangeError(atitle(title) + "expected integer >= 0, got " + n);
  return n;
}
function abytes(value, length, title = "") {
  if (isBytes(value) && (length === void 0 || value.length === length))
    return value;
  if (length !== void 0)
    anumber(length, "length");
  const bytes = isBytes(value);
  const ofLen = length !== void 0 ? ` of length ${length}` : "";
  const got = bytes ? `length=${value.length}` : `type=${typeof value}`;
  const message = atitle(title) + "expected Uint8Array" + ofLen + ", got " + got;
  if (!bytes)
    throw new TypeError(message);
  throw new RangeError(message);
}
var aobject = (value, label) => {
  if (value === null || typeof value !== "object" || Array.isArray(value))
    throw new TypeError((label === "object" ? "" : `"${label}" `) + "expected object, got type=" + typeof value);
};
var aopts = (value, label) => {
  aobject(value, label);
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null)
    throw new TypeError(`"${label}" expected plain object`);
  if (Object.hasOwn(value, "__proto__"))
    throw new TypeError(`"${label}.__proto__" is not allowed`);
};
function aexists(instance, checkFinished = true) {
  if (instance.destroyed)
    throw new Error("hash was destroyed");
  if (checkFinished && instance.finished)
    throw new Error("digest() was already called");
}
function aoutput(out, instance) {
  abytes(out, void 0, "output");
  const min = instance.outputLen;
  if (!(out.length >= min)) {
    throw new RangeError('"output" expected length >= ' + min);
  }
}
function clean(...arrays) {
  for (let i = 0; i < arrays.length; i++) {
    arrays[i].fill(0);
  }
}
function createView(arr) {
  return new DataView(arr.buffer, arr.byteOffset, arr.byteLength);
}
function rotr(word, shift) {
  return word << 32 - shift | word >>> shift;
}
function checkOpts(defaults, opts, title = "opts") {
  aopts(defaults, "defaults");
  if (opts !== void 0)
    aopts(opts, title);
  const merged = Object.assign(/* @__PURE__ */ Object.create(null), defaults, opts);
  return merged;
}
function createHasher(hashCons, info = {}) {
  if (typeof hashCons !== "function")
    throw new TypeError('"hashCons" expected function, got type=' + typeof hashCons);
  info = checkOpts({}, info, "info");
  const hashC = (msg, opts) => hashCons(opts).update(msg).digest();
  const tmp = hashCons(void 0);
  hashC.outputLen = tmp.outputLen;
  hashC.blockLen = tmp.blockLen;
  hashC.canXOF = tmp.canXOF;
  hashC.create = (opts) => hashCons(opts);
  Object.assign(hashC, info);
  return Object.freeze(hashC);
}
var oidNist = (suffix) => ({
  // Current NIST hashAlgs suffixes used here fit in one DER subidentifier octet.
  // Larger suffix values would need base-128 OID encoding and a different length byte.
  oid: Uint8Array.from([6, 9, 96, 134, 72, 1, 101, 3, 4, 2, suffix])
});

// clients/typescript/node_modules/@noble/hashes/_md.js
function Chi(a, b, c) {
  return a & b ^ ~a & c;
}
function Maj(a, b, c) {
  return a & b ^ a & c ^ b & c;
}
var HashMD = class {
  blockLen;
  outputLen;
  canXOF = false;
  padOffset;
  isLE;
  // For partial updates less than block size
  buffer;
  view;
  finished = false;
  length = 0;
  pos = 0;
  destroyed = false;
  constructor(blockLen, outputLen, padOffset, isLE) {
    this.blockLen = blockLen;
    this.outputLen = outputLen;
    this.padOffset = padOffset;
    this.isLE = isLE;
    this.buffer = new Uint8Array(blockLen);
    this.view = createView(this.buffer);
  }
  update(data) {
    aexists(this);
    abytes(data);
    const { view, buffer, blockLen } = this;
    const len = data.length;
    let processed = false;
    for (let pos = 0; pos < len; ) {
      const take = Math.min(blockLen - this.pos, len - pos);
      if (take === blockLen) {
        const dataView = createView(data);
        for (; blockLen <= len - pos; pos += blockLen)
          this.process(dataView, pos);
        processed = true;
        continue;
      }
      buffer.set(pos === 0 && take === len ? data : data.subarray(pos, pos + take), this.pos);
      this.pos += take;
      pos += take;
      if (this.pos === blockLen) {
        this.process(view, 0);
        this.pos = 0;
        processed = true;
      }
    }
    this.length += data.length;
    if (processed)
      this.roundClean();
    return this;
  }
  digestInto(out) {
    aexists(this);
    aoutput(out, this);
    this.finished = true;
    const { buffer, view, blockLen, isLE } = this;
    let { pos } = this;
    buffer[pos++] = 128;
    buffer.fill(0, pos);
    if (this.padOffset > blockLen - pos) {
      this.process(view, 0);
      buffer.fill(0);
    }
    setU64FromNum(view, blockLen - 8, this.length * 8, isLE);
    this.process(view, 0);
    this.roundClean();
    const oview = out === buffer ? view : createView(out);
    const len = this.outputLen;
    const outLen = len / 4;
    const state = this.get();
    if (len % 4 || outLen > state.length)
      throw new Error("invalid outputLen");
    for (let i = 0; i < outLen; i++)
      oview.setUint32(4 * i, state[i], isLE);
  }
  digest() {
    const { buffer, outputLen } = this;
    this.digestInto(buffer);
    const res = buffer.slice(0, outputLen);
    this.destroy();
    return res;
  }
  _cloneIntoMeta(to) {
    const { buffer, length, finished, destroyed, pos } = this;
    to.destroyed = destroyed;
    to.finished = finished;
    to.length = length;
    to.pos = pos;
    if (pos)
      to.buffer.set(buffer);
    return to;
  }
  clone() {
    return this._cloneInto();
  }
};
var SHA256_IV = /* @__PURE__ */ Uint32Array.from([
  1779033703,
  3144134277,
  1013904242,
  2773480762,
  1359893119,
  2600822924,
  528734635,
  1541459225
]);

// clients/typescript/node_modules/@noble/hashes/sha2.js
var SHA256_K = /* @__PURE__ */ Uint32Array.from([
  1116352408,
  1899447441,
  3049323471,
  3921009573,
  961987163,
  1508970993,
  2453635748,
  2870763221,
  3624381080,
  310598401,
  607225278,
  1426881987,
  1925078388,
  2162078206,
  2614888103,
  3248222580,
  3835390401,
  4022224774,
  264347078,
  604807628,
  770255983,
  1249150122,
  1555081692,
  1996064986,
  2554220882,
  2821834349,
  2952996808,
  3210313671,
  3336571891,
  3584528711,
  113926993,
  338241895,
  666307205,
  773529912,
  1294757372,
  1396182291,
  1695183700,
  1986661051,
  2177026350,
  2456956037,
  2730485921,
  2820302411,
  3259730800,
  3345764771,
  3516065817,
  3600352804,
  4094571909,
  275423344,
  430227734,
  506948616,
  659060556,
  883997877,
  958139571,
  1322822218,
  1537002063,
  1747873779,
  1955562222,
  2024104815,
  2227730452,
  2361852424,
  2428436474,
  2756734187,
  3204031479,
  3329325298
]);
var SHA256_W = /* @__PURE__ */ new Uint32Array(64);
var SHA2_32B = class extends HashMD {
  // We cannot use array here since array allows indexing by variable
  // which means optimizer/compiler cannot use registers.
  // Numeric initializers matter: starting the fields as `undefined` changes
  // V8's field representation and makes sha256 3x slower (measured).
  A = 0;
  B = 0;
  C = 0;
  D = 0;
  E = 0;
  F = 0;
  G = 0;
  H = 0;
  constructor(outputLen, IV) {
    super(64, outputLen, 8, false);
    this.A = IV[0] | 0;
    this.B = IV[1] | 0;
    this.C = IV[2] | 0;
    this.D = IV[3] | 0;
    this.E = IV[4] | 0;
    this.F = IV[5] | 0;
    this.G = IV[6] | 0;
    this.H = IV[7] | 0;
  }
  get() {
    const { A, B, C, D, E, F, G, H } = this;
    return [A, B, C, D, E, F, G, H];
  }
  // prettier-ignore
  set(A, B, C, D, E, F, G, H) {
    this.A = A | 0;
    this.B = B | 0;
    this.C = C | 0;
    this.D = D | 0;
    this.E = E | 0;
    this.F = F | 0;
    this.G = G | 0;
    this.H = H | 0;
  }
  _cloneInto(to) {
    (to ||= new this.constructor()).set(...this.get());
    return this._cloneIntoMeta(to);
  }
  process(view, offset) {
    for (let i = 0; i < 16; i++, offset += 4)
      SHA256_W[i] = view.getUint32(offset, false);
    for (let i = 16; i < 64; i++) {
      const W15 = SHA256_W[i - 15];
      const W2 = SHA256_W[i - 2];
      const s0 = rotr(W15, 7) ^ rotr(W15, 18) ^ W15 >>> 3;
      const s1 = rotr(W2, 17) ^ rotr(W2, 19) ^ W2 >>> 10;
      SHA256_W[i] = s1 + SHA256_W[i - 7] + s0 + SHA256_W[i - 16] | 0;
    }
    let { A, B, C, D, E, F, G, H } = this;
    for (let i = 0; i < 64; i++) {
      const sigma1 = rotr(E, 6) ^ rotr(E, 11) ^ rotr(E, 25);
      const T1 = H + sigma1 + Chi(E, F, G) + SHA256_K[i] + SHA256_W[i] | 0;
      const sigma0 = rotr(A, 2) ^ rotr(A, 13) ^ rotr(A, 22);
      const T2 = sigma0 + Maj(A, B, C) | 0;
      H = G;
      G = F;
      F = E;
      E = D + T1 | 0;
      D = C;
      C = B;
      B = A;
      A = T1 + T2 | 0;
    }
    A = A + this.A | 0;
    B = B + this.B | 0;
    C = C + this.C | 0;
    D = D + this.D | 0;
    E = E + this.E | 0;
    F = F + this.F | 0;
    G = G + this.G | 0;
    H = H + this.H | 0;
    this.set(A, B, C, D, E, F, G, H);
  }
  roundClean() {
    clean(SHA256_W);
  }
  destroy() {
    this.destroyed = true;
    this.set(0, 0, 0, 0, 0, 0, 0, 0);
    clean(this.buffer);
  }
};
var _SHA256 = class extends SHA2_32B {
  constructor() {
    super(32, SHA256_IV);
  }
};
var sha256 = /* @__PURE__ */ createHasher(
  () => new _SHA256(),
  /* @__PURE__ */ oidNist(1)
);

// clients/typescript/src/checkpoints.ts
var CandidateHistories = class {
  /**
   * What the next delta applies to: the previous candidate's history data, or for the first one
   * the previous state's as the host sent it (`[]` without one). Kept as text until a delta needs
   * its bytes, so full candidates cost nothing.
   */
  #base;
  /** @param spec - The spec the stream was started with: its `previous_state` is the first base. */
  constructor(spec) {
    this.#base = spec.previousState === void 0 ? "[]" : spec.previousState.messageHistory?.data ?? "";
  }
  /**
   * Complete `event` in place when it is a delta candidate: set its `message_history.data` to the
   * rebuilt history (`history_delta` stays), and keep that as the next base. Other events pass.
   *
   * @throws ProtocolError when the candidate has no history to rebuild, the delta does not fit its
   *   base, or the rebuilt data does not match the candidate's `sha256`; the base stays as it was.
   */
  complete(event) {
    if (event.event.case !== "checkpointCandidate") {
      return;
    }
    const { state, historyDelta } = event.event.value;
    const history2 = state?.messageHistory;
    if (historyDelta === void 0) {
      this.#base = history2?.data ?? "";
      return;
    }
    const broken = (why) => new ProtocolError(`the checkpoint candidate at sequence ${event.sequence} does not rebuild: ${why}`);
    if (history2 === void 0) {
      throw broken("its history_delta has no state.message_history to rebuild");
    }
    const base = typeof this.#base === "string" ? UTF8.encode(this.#base) : this.#base;
    const { keepBytes, append } = historyDelta;
    if (keepBytes > BigInt(base.length)) {
      throw broken(`its history_delta keeps ${keepBytes} bytes of a base that has ${base.length}`);
    }
    const added = UTF8.encode(append);
    const data = new Uint8Array(Number(keepBytes) + added.length);
    data.set(base.subarray(0, Number(keepBytes)));
    data.set(added, Number(keepBytes));
    if (!sameBytes(sha256(data), history2.sha256)) {
      throw broken("its rebuilt history does not match message_history.sha256");
    }
    history2.data = new TextDecoder("utf-8").decode(data);
    this.#base = data;
  }
};
var UTF8 = new TextEncoder();
function sameBytes(a, b) {
  return a.length === b.length && a.every((byte, index) => byte === b[index]);
}

// clients/typescript/src/deferred.ts
function approve(call2, options = {}) {
  return create(ApprovalResultSchema, {
    toolCallId: callId(call2),
    decision: {
      case: "approved",
      value: options.overrideArgs === void 0 ? {} : { overrideArgsJson: toJson2(options.overrideArgs) }
    },
    ...answerFields(options)
  });
}
function deny(call2, message = "", options = {}) {
  return create(ApprovalResultSchema, {
    toolCallId: callId(call2),
    decision: { case: "denied", value: { message } },
    ...answerFields(options)
  });
}
function callResult(call2, value, options = {}) {
  return create(CallResultSchema, {
    toolCallId: callId(call2),
    result: { case: "valueJson", value: toJson2(value) },
    ...answerFields(options)
  });
}
function answers(...answers2) {
  return answersOf(answers2);
}
function answersOf(answers2) {
  return create(DeferredToolResultsSchema, {
    approvals: answers2.filter((answer) => answer.$typeName === "threadline.v1.ApprovalResult"),
    calls: answers2.filter((answer) => answer.$typeName === "threadline.v1.CallResult")
  });
}
function callId(call2) {
  return typeof call2 === "string" ? call2 : call2.toolCallId;
}
function answerFields(options) {
  return {
    answeredBy: options.answeredBy ?? "",
    metadataJson: options.metadata === void 0 ? "" : toJson2(options.metadata)
  };
}
function toJson2(value) {
  const text = JSON.stringify(value);
  return text === void 0 ? "null" : text;
}

// clients/typescript/src/children.ts
function childRunInput(request, input, state) {
  return {
    ...input,
    agent: request.agent,
    previousState: state,
    ...request.parent && { lineage: request.parent },
    ...input.deferredResume === void 0 && { prompt: request.input }
  };
}
async function childState(request, input, start2) {
  if (input.previousState !== void 0) {
    return input.previousState;
  }
  if (request.action !== 1 /* START */) {
    throw new RangeError(`continuing the child ${request.threadId} needs its saved state (previousState)`);
  }
  return start2();
}

// clients/typescript/src/gen/threadline/v1/events_pb.ts
var file_threadline_v1_events = /* @__PURE__ */ fileDesc("Chp0aHJlYWRsaW5lL3YxL2V2ZW50cy5wcm90bxINdGhyZWFkbGluZS52MSLxBgoIUnVuRXZlbnQSEQoJdGhyZWFkX2lkGAEgASgJEg4KBnJ1bl9pZBgCIAEoCRIQCghzZXF1ZW5jZRgDIAEoBBIvCgtvY2N1cnJlZF9hdBgEIAEoCzIaLmdvb2dsZS5wcm90b2J1Zi5UaW1lc3RhbXASMAoLcnVuX3N0YXJ0ZWQYCiABKAsyGS50aHJlYWRsaW5lLnYxLlJ1blN0YXJ0ZWRIABIuCgpwYXJ0X3N0YXJ0GAsgASgLMhgudGhyZWFkbGluZS52MS5QYXJ0U3RhcnRIABIuCgpwYXJ0X2RlbHRhGAwgASgLMhgudGhyZWFkbGluZS52MS5QYXJ0RGVsdGFIABIqCghwYXJ0X2VuZBgNIAEoCzIWLnRocmVhZGxpbmUudjEuUGFydEVuZEgAEiwKCXRvb2xfY2FsbBgOIAEoCzIXLnRocmVhZGxpbmUudjEuVG9vbENhbGxIABIwCgt0b29sX3Jlc3VsdBgPIAEoCzIZLnRocmVhZGxpbmUudjEuVG9vbFJlc3VsdEgAEjIKDGZpbmFsX3Jlc3VsdBgQIAEoCzIaLnRocmVhZGxpbmUudjEuRmluYWxSZXN1bHRIABJCChRjaGVja3BvaW50X2NhbmRpZGF0ZRgRIAEoCzIiLnRocmVhZGxpbmUudjEuQ2hlY2twb2ludENhbmRpZGF0ZUgAEioKBnJlc3VsdBgSIAEoCzIYLnRocmVhZGxpbmUudjEuUnVuUmVzdWx0SAASLQoJbGlmZWN5Y2xlGBMgASgLMhgudGhyZWFkbGluZS52MS5MaWZlY3ljbGVIABInCgZuYXRpdmUYFCABKAsyFS50aHJlYWRsaW5lLnYxLk5hdGl2ZUgAEjoKEHRocmVhZF9jb21taXR0ZWQYFSABKAsyHi50aHJlYWRsaW5lLnYxLlRocmVhZENvbW1pdHRlZEgAEjwKEWlubGluZV9kZWxlZ2F0aW9uGBYgASgLMh8udGhyZWFkbGluZS52MS5JbmxpbmVEZWxlZ2F0aW9uSAASNgoOZXZlbnRzX29taXR0ZWQYGCABKAsyHC50aHJlYWRsaW5lLnYxLkV2ZW50c09taXR0ZWRIABIqCgZvcmlnaW4YFyABKAsyGi50aHJlYWRsaW5lLnYxLkV2ZW50T3JpZ2luQgcKBWV2ZW50IjoKClJ1blN0YXJ0ZWQSLAoHbGluZWFnZRgBIAEoCzIbLnRocmVhZGxpbmUudjEuQ2hpbGRMaW5lYWdlIuIBChBJbmxpbmVEZWxlZ2F0aW9uEhUKDWludm9jYXRpb25faWQYASABKAkSDgoGYWN0aW9uGAIgASgJEhkKEWNoaWxkX2luc3RhbmNlX2lkGAMgASgJEhAKCHN1YmFnZW50GAQgASgJEg4KBnN0YXR1cxgFIAEoCRIVCg1wYXJlbnRfcnVuX2lkGAYgASgJEiAKGHBhcmVudF9hZ2VudF9pbnN0YW5jZV9pZBgHIAEoCRIbChNwYXJlbnRfdG9vbF9jYWxsX2lkGAggASgJEhQKDGNoaWxkX3J1bl9pZBgJIAEoCSJ6CgtFdmVudE9yaWdpbhIRCgl0aHJlYWRfaWQYASABKAkSDgoGcnVuX2lkGAIgASgJEhAKCHNlcXVlbmNlGAMgASgEEhkKEWNoaWxkX2luc3RhbmNlX2lkGAQgASgJEhsKE3BhcmVudF90b29sX2NhbGxfaWQYBSABKAkiYgoPVGhyZWFkQ29tbWl0dGVkEhAKCHJldmlzaW9uGAEgASgDEisKBGtpbmQYAiABKA4yHS50aHJlYWRsaW5lLnYxLkNoZWNrcG9pbnRLaW5kEhAKCHJlcGxheWVkGAMgASgIIpMBCglQYXJ0U3RhcnQSEgoKcGFydF9pbmRleBgBIAEoDRIlCgRraW5kGAIgASgOMhcudGhyZWFkbGluZS52MS5QYXJ0S2luZBIPCgdjb250ZW50GAMgASgJEhEKCXRvb2xfbmFtZRgEIAEoCRIUCgx0b29sX2NhbGxfaWQYBSABKAkSEQoJYXJnc19qc29uGAYgASgJIqABCglQYXJ0RGVsdGESEgoKcGFydF9pbmRleBgBIAEoDRIlCgRraW5kGAIgASgOMhcudGhyZWFkbGluZS52MS5QYXJ0S2luZBIVCg1jb250ZW50X2RlbHRhGAMgASgJEhcKD3Rvb2xfbmFtZV9kZWx0YRgEIAEoCRIUCgx0b29sX2NhbGxfaWQYBSABKAkSEgoKYXJnc19kZWx0YRgGIAEoCSKRAQoHUGFydEVuZBISCgpwYXJ0X2luZGV4GAEgASgNEiUKBGtpbmQYAiABKA4yFy50aHJlYWRsaW5lLnYxLlBhcnRLaW5kEg8KB2NvbnRlbnQYAyABKAkSEQoJdG9vbF9uYW1lGAQgASgJEhQKDHRvb2xfY2FsbF9pZBgFIAEoCRIRCglhcmdzX2pzb24YBiABKAkiRgoIVG9vbENhbGwSFAoMdG9vbF9jYWxsX2lkGAEgASgJEhEKCXRvb2xfbmFtZRgCIAEoCRIRCglhcmdzX2pzb24YAyABKAkieAoKVG9vbFJlc3VsdBIUCgx0b29sX2NhbGxfaWQYASABKAkSEQoJdG9vbF9uYW1lGAIgASgJEisKB291dGNvbWUYAyABKA4yGi50aHJlYWRsaW5lLnYxLlRvb2xPdXRjb21lEhQKDGNvbnRlbnRfanNvbhgEIAEoCSI2CgtGaW5hbFJlc3VsdBIRCgl0b29sX25hbWUYASABKAkSFAoMdG9vbF9jYWxsX2lkGAIgASgJInUKE0NoZWNrcG9pbnRDYW5kaWRhdGUSKgoFc3RhdGUYASABKAsyGy50aHJlYWRsaW5lLnYxLkhhcm5lc3NTdGF0ZRIyCg1oaXN0b3J5X2RlbHRhGAIgASgLMhsudGhyZWFkbGluZS52MS5IaXN0b3J5RGVsdGEiMgoMSGlzdG9yeURlbHRhEhIKCmtlZXBfYnl0ZXMYASABKAQSDgoGYXBwZW5kGAIgASgJIlUKCUxpZmVjeWNsZRIMCgRraW5kGAEgASgJEgwKBHR5cGUYAiABKAkSFgoOc2NoZW1hX3ZlcnNpb24YAyABKAkSFAoMcGF5bG9hZF9qc29uGAQgASgJIioKBk5hdGl2ZRISCgpldmVudF9raW5kGAEgASgJEgwKBGpzb24YAiABKAkiVgoNRXZlbnRzT21pdHRlZBIWCg5maXJzdF9zZXF1ZW5jZRgBIAEoBBItCgZyZWFzb24YAiABKA4yHS50aHJlYWRsaW5lLnYxLk9taXNzaW9uUmVhc29uKmoKCFBhcnRLaW5kEhkKFVBBUlRfS0lORF9VTlNQRUNJRklFRBAAEhIKDlBBUlRfS0lORF9URVhUEAESFgoSUEFSVF9LSU5EX1RISU5LSU5HEAISFwoTUEFSVF9LSU5EX1RPT0xfQ0FMTBADKq8BCgtUb29sT3V0Y29tZRIcChhUT09MX09VVENPTUVfVU5TUEVDSUZJRUQQABIYChRUT09MX09VVENPTUVfU1VDQ0VTUxABEhcKE1RPT0xfT1VUQ09NRV9GQUlMRUQQAhIXChNUT09MX09VVENPTUVfREVOSUVEEAMSHAoYVE9PTF9PVVRDT01FX0lOVEVSUlVQVEVEEAQSGAoUVE9PTF9PVVRDT01FX1JFVFJJRUQQBSrBAQoOT21pc3Npb25SZWFzb24SHwobT01JU1NJT05fUkVBU09OX1VOU1BFQ0lGSUVEEAASJAogT01JU1NJT05fUkVBU09OX0RFTFRBU19DT0FMRVNDRUQQARIcChhPTUlTU0lPTl9SRUFTT05fTE9HX0ZVTEwQAhIjCh9PTUlTU0lPTl9SRUFTT05fRVZFTlRfVE9PX0xBUkdFEAMSJQohT01JU1NJT05fUkVBU09OX1NUT1JFX1VOQVZBSUxBQkxFEARCqQEKEWRldi50aHJlYWRsaW5lLnYxQgtFdmVudHNQcm90b1ABWk5naXRodWIuY29tL3RocmVhZGxpbmUtZGV2L3RocmVhZGxpbmUvY2xpZW50cy9nby9nZW4vdGhyZWFkbGluZS92MTt0aHJlYWRsaW5ldjGiAgNUTE6qAg1UaHJlYWRsaW5lLlYxygINVGhyZWFkbGluZVxWMeoCDlRocmVhZGxpbmU6OlYxYgZwcm90bzM", [file_google_protobuf_timestamp, file_threadline_v1_deferred, file_threadline_v1_run, file_threadline_v1_state, file_threadline_v1_thread]);
var ToolOutcome = /* @__PURE__ */ ((ToolOutcome2) => {
  ToolOutcome2[ToolOutcome2["UNSPECIFIED"] = 0] = "UNSPECIFIED";
  ToolOutcome2[ToolOutcome2["SUCCESS"] = 1] = "SUCCESS";
  ToolOutcome2[ToolOutcome2["FAILED"] = 2] = "FAILED";
  ToolOutcome2[ToolOutcome2["DENIED"] = 3] = "DENIED";
  ToolOutcome2[ToolOutcome2["INTERRUPTED"] = 4] = "INTERRUPTED";
  ToolOutcome2[ToolOutcome2["RETRIED"] = 5] = "RETRIED";
  return ToolOutcome2;
})(ToolOutcome || {});
var OmissionReason = /* @__PURE__ */ ((OmissionReason2) => {
  OmissionReason2[OmissionReason2["UNSPECIFIED"] = 0] = "UNSPECIFIED";
  OmissionReason2[OmissionReason2["DELTAS_COALESCED"] = 1] = "DELTAS_COALESCED";
  OmissionReason2[OmissionReason2["LOG_FULL"] = 2] = "LOG_FULL";
  OmissionReason2[OmissionReason2["EVENT_TOO_LARGE"] = 3] = "EVENT_TOO_LARGE";
  OmissionReason2[OmissionReason2["STORE_UNAVAILABLE"] = 4] = "STORE_UNAVAILABLE";
  return OmissionReason2;
})(OmissionReason || {});

// clients/typescript/src/gen/threadline/v1/harness_service_pb.ts
var file_threadline_v1_harness_service = /* @__PURE__ */ fileDesc("CiN0aHJlYWRsaW5lL3YxL2hhcm5lc3Nfc2VydmljZS5wcm90bxINdGhyZWFkbGluZS52MSJYChBTdHJlYW1SdW5SZXF1ZXN0EiQKBHNwZWMYASABKAsyFi50aHJlYWRsaW5lLnYxLlJ1blNwZWMSHgoWbWF4X2V2ZW50c19wZXJfbWVzc2FnZRgCIAEoDSJkChFTdHJlYW1SdW5SZXNwb25zZRImCgVldmVudBgBIAEoCzIXLnRocmVhZGxpbmUudjEuUnVuRXZlbnQSJwoGZXZlbnRzGAIgAygLMhcudGhyZWFkbGluZS52MS5SdW5FdmVudCIyCgpSdW5SZXF1ZXN0EiQKBHNwZWMYASABKAsyFi50aHJlYWRsaW5lLnYxLlJ1blNwZWMiNwoLUnVuUmVzcG9uc2USKAoGcmVzdWx0GAEgASgLMhgudGhyZWFkbGluZS52MS5SdW5SZXN1bHQi1AEKD05ld1N0YXRlUmVxdWVzdBIRCgl0aHJlYWRfaWQYASABKAkSNgoPbWVzc2FnZV9oaXN0b3J5GAIgASgLMh0udGhyZWFkbGluZS52MS5NZXNzYWdlSGlzdG9yeRI5ChFjYXBhYmlsaXR5X3N0YXRlcxgDIAMoCzIeLnRocmVhZGxpbmUudjEuQ2FwYWJpbGl0eVN0YXRlEjsKEmVudmlyb25tZW50X3N0YXRlcxgEIAMoCzIfLnRocmVhZGxpbmUudjEuRW52aXJvbm1lbnRTdGF0ZSI+ChBOZXdTdGF0ZVJlc3BvbnNlEioKBXN0YXRlGAEgASgLMhsudGhyZWFkbGluZS52MS5IYXJuZXNzU3RhdGUiUQoQRm9ya1N0YXRlUmVxdWVzdBIqCgVzdGF0ZRgBIAEoCzIbLnRocmVhZGxpbmUudjEuSGFybmVzc1N0YXRlEhEKCXRocmVhZF9pZBgCIAEoCSI/ChFGb3JrU3RhdGVSZXNwb25zZRIqCgVzdGF0ZRgBIAEoCzIbLnRocmVhZGxpbmUudjEuSGFybmVzc1N0YXRlImQKFFZhbGlkYXRlU3RhdGVSZXF1ZXN0EiwKBXN0YXRlGAEgASgLMhsudGhyZWFkbGluZS52MS5IYXJuZXNzU3RhdGVIABIUCgpzdGF0ZV9qc29uGAIgASgJSABCCAoGc291cmNlIlcKFVZhbGlkYXRlU3RhdGVSZXNwb25zZRIqCgVzdGF0ZRgBIAEoCzIbLnRocmVhZGxpbmUudjEuSGFybmVzc1N0YXRlEhIKCnN0YXRlX2pzb24YAiABKAkieQoYUmVtYWluaW5nRGVmZXJyZWRSZXF1ZXN0EjEKBnJlc3VtZRgBIAEoCzIhLnRocmVhZGxpbmUudjEuRGVmZXJyZWRUb29sUmVzdW1lEioKBXN0YXRlGAIgASgLMhsudGhyZWFkbGluZS52MS5IYXJuZXNzU3RhdGUiUQoZUmVtYWluaW5nRGVmZXJyZWRSZXNwb25zZRI0CglyZW1haW5pbmcYASABKAsyIS50aHJlYWRsaW5lLnYxLkRlZmVycmVkVG9vbFJlc3VtZSIWChRHZXRTZXJ2ZXJJbmZvUmVxdWVzdCLqAgoVR2V0U2VydmVySW5mb1Jlc3BvbnNlEhcKD3NjaGVtYV92ZXJzaW9ucxgBIAMoCRI1Cg9oaXN0b3J5X2Zvcm1hdHMYAiADKAsyHC50aHJlYWRsaW5lLnYxLkhpc3RvcnlGb3JtYXQSKAoGYWdlbnRzGAMgAygLMhgudGhyZWFkbGluZS52MS5BZ2VudEluZm8SFQoNZGVmYXVsdF9hZ2VudBgEIAEoCRIrCgZsaW1pdHMYBSABKAsyGy50aHJlYWRsaW5lLnYxLlNlcnZlckxpbWl0cxIWCg5zZXJ2ZXJfdmVyc2lvbhgGIAEoCRI0Cgx0aHJlYWRfc3RvcmUYByABKAsyHi50aHJlYWRsaW5lLnYxLlRocmVhZFN0b3JlSW5mbxJFChVlbnZpcm9ubWVudF9wcm92aWRlcnMYCCADKAsyJi50aHJlYWRsaW5lLnYxLkVudmlyb25tZW50UHJvdmlkZXJJbmZvIkcKF0Vudmlyb25tZW50UHJvdmlkZXJJbmZvEhQKDHByb3ZpZGVyX2tleRgBIAEoCRIWCg5zdGF0ZV92ZXJzaW9ucxgCIAMoCSKeAgoPVGhyZWFkU3RvcmVJbmZvEiwKBGtpbmQYASABKA4yHi50aHJlYWRsaW5lLnYxLlRocmVhZFN0b3JlS2luZBIsCglsZWFzZV90dGwYAiABKAsyGS5nb29nbGUucHJvdG9idWYuRHVyYXRpb24SEQoJZXZlbnRfbG9nGAMgASgIEjIKD2V2ZW50X3JldGVudGlvbhgEIAEoCzIZLmdvb2dsZS5wcm90b2J1Zi5EdXJhdGlvbhIbChNldmVudF9sb2dfbWF4X2J5dGVzGAUgASgEEhgKEG1heF9ydW5fYXR0ZW1wdHMYBiABKA0SFwoPbWF4X3F1ZXVlZF9ydW5zGAcgASgNEhgKEGRpc3BhdGNoX2ludGVudHMYCCABKAgiMQoNSGlzdG9yeUZvcm1hdBIOCgZmb3JtYXQYASABKAkSEAoIdmVyc2lvbnMYAiADKAkimwEKCUFnZW50SW5mbxIMCgRuYW1lGAEgASgJEiYKBXRvb2xzGAIgAygLMhcudGhyZWFkbGluZS52MS5Ub29sSW5mbxIoCgZtb3VudHMYAyADKAsyGC50aHJlYWRsaW5lLnYxLk1vdW50SW5mbxIuCglzdWJhZ2VudHMYBCADKAsyGy50aHJlYWRsaW5lLnYxLlN1YmFnZW50SW5mbyKIAQoMU3ViYWdlbnRJbmZvEgwKBG5hbWUYASABKAkSEwoLZGVzY3JpcHRpb24YAiABKAkSKQoEbW9kZRgDIAEoDjIbLnRocmVhZGxpbmUudjEuU3ViYWdlbnRNb2RlEg0KBWFnZW50GAQgASgJEhsKE2NoaWxkX2RlZmluaXRpb25faWQYBSABKAkiWQoJTW91bnRJbmZvEgwKBG5hbWUYASABKAkSFAoMcHJvdmlkZXJfa2V5GAIgASgJEg8KB2FjdGlvbnMYAyADKAkSFwoPcHJvY2Vzc19jYXBhYmxlGAQgASgIIngKCFRvb2xJbmZvEgwKBG5hbWUYASABKAkSLQoIY2F0ZWdvcnkYAiABKA4yGy50aHJlYWRsaW5lLnYxLlRvb2xDYXRlZ29yeRITCgtkZXNjcmlwdGlvbhgDIAEoCRIaChJyZWNvdmVyeV9yZXRyeWFibGUYBCABKAgiRgoMU2VydmVyTGltaXRzEhkKEW1heF9tZXNzYWdlX2J5dGVzGAEgASgDEhsKE21heF9jb25jdXJyZW50X3J1bnMYAiABKAMqrgEKD1RocmVhZFN0b3JlS2luZBIhCh1USFJFQURfU1RPUkVfS0lORF9VTlNQRUNJRklFRBAAEhwKGFRIUkVBRF9TVE9SRV9LSU5EX1NRTElURRABEiAKHFRIUkVBRF9TVE9SRV9LSU5EX1BPU1RHUkVTUUwQAhIcChhUSFJFQURfU1RPUkVfS0lORF9NRU1PUlkQAxIaChZUSFJFQURfU1RPUkVfS0lORF9OT05FEAQqXwoMU3ViYWdlbnRNb2RlEh0KGVNVQkFHRU5UX01PREVfVU5TUEVDSUZJRUQQABIYChRTVUJBR0VOVF9NT0RFX0lOTElORRABEhYKElNVQkFHRU5UX01PREVfSE9TVBACKq0BCgxUb29sQ2F0ZWdvcnkSHQoZVE9PTF9DQVRFR09SWV9VTlNQRUNJRklFRBAAEhcKE1RPT0xfQ0FURUdPUllfUExBSU4QARIjCh9UT09MX0NBVEVHT1JZX1JFUVVJUkVTX0FQUFJPVkFMEAISGgoWVE9PTF9DQVRFR09SWV9FWFRFUk5BTBADEiQKIFRPT0xfQ0FURUdPUllfUkVDT1ZFUllfUkVUUllBQkxFEAQy3QQKDkhhcm5lc3NTZXJ2aWNlElAKCVN0cmVhbVJ1bhIfLnRocmVhZGxpbmUudjEuU3RyZWFtUnVuUmVxdWVzdBogLnRocmVhZGxpbmUudjEuU3RyZWFtUnVuUmVzcG9uc2UwARI8CgNSdW4SGS50aHJlYWRsaW5lLnYxLlJ1blJlcXVlc3QaGi50aHJlYWRsaW5lLnYxLlJ1blJlc3BvbnNlEksKCE5ld1N0YXRlEh4udGhyZWFkbGluZS52MS5OZXdTdGF0ZVJlcXVlc3QaHy50aHJlYWRsaW5lLnYxLk5ld1N0YXRlUmVzcG9uc2USTgoJRm9ya1N0YXRlEh8udGhyZWFkbGluZS52MS5Gb3JrU3RhdGVSZXF1ZXN0GiAudGhyZWFkbGluZS52MS5Gb3JrU3RhdGVSZXNwb25zZRJaCg1WYWxpZGF0ZVN0YXRlEiMudGhyZWFkbGluZS52MS5WYWxpZGF0ZVN0YXRlUmVxdWVzdBokLnRocmVhZGxpbmUudjEuVmFsaWRhdGVTdGF0ZVJlc3BvbnNlEmYKEVJlbWFpbmluZ0RlZmVycmVkEicudGhyZWFkbGluZS52MS5SZW1haW5pbmdEZWZlcnJlZFJlcXVlc3QaKC50aHJlYWRsaW5lLnYxLlJlbWFpbmluZ0RlZmVycmVkUmVzcG9uc2USWgoNR2V0U2VydmVySW5mbxIjLnRocmVhZGxpbmUudjEuR2V0U2VydmVySW5mb1JlcXVlc3QaJC50aHJlYWRsaW5lLnYxLkdldFNlcnZlckluZm9SZXNwb25zZUKxAQoRZGV2LnRocmVhZGxpbmUudjFCE0hhcm5lc3NTZXJ2aWNlUHJvdG9QAVpOZ2l0aHViLmNvbS90aHJlYWRsaW5lLWRldi90aHJlYWRsaW5lL2NsaWVudHMvZ28vZ2VuL3RocmVhZGxpbmUvdjE7dGhyZWFkbGluZXYxogIDVExOqgINVGhyZWFkbGluZS5WMcoCDVRocmVhZGxpbmVcVjHqAg5UaHJlYWRsaW5lOjpWMWIGcHJvdG8z", [file_google_protobuf_duration, file_google_rpc_error_details, file_threadline_v1_deferred, file_threadline_v1_events, file_threadline_v1_run, file_threadline_v1_state]);
var ThreadStoreKind = /* @__PURE__ */ ((ThreadStoreKind2) => {
  ThreadStoreKind2[ThreadStoreKind2["UNSPECIFIED"] = 0] = "UNSPECIFIED";
  ThreadStoreKind2[ThreadStoreKind2["SQLITE"] = 1] = "SQLITE";
  ThreadStoreKind2[ThreadStoreKind2["POSTGRESQL"] = 2] = "POSTGRESQL";
  ThreadStoreKind2[ThreadStoreKind2["MEMORY"] = 3] = "MEMORY";
  ThreadStoreKind2[ThreadStoreKind2["NONE"] = 4] = "NONE";
  return ThreadStoreKind2;
})(ThreadStoreKind || {});
var SubagentMode = /* @__PURE__ */ ((SubagentMode2) => {
  SubagentMode2[SubagentMode2["UNSPECIFIED"] = 0] = "UNSPECIFIED";
  SubagentMode2[SubagentMode2["INLINE"] = 1] = "INLINE";
  SubagentMode2[SubagentMode2["HOST"] = 2] = "HOST";
  return SubagentMode2;
})(SubagentMode || {});
var ToolCategory = /* @__PURE__ */ ((ToolCategory2) => {
  ToolCategory2[ToolCategory2["UNSPECIFIED"] = 0] = "UNSPECIFIED";
  ToolCategory2[ToolCategory2["PLAIN"] = 1] = "PLAIN";
  ToolCategory2[ToolCategory2["REQUIRES_APPROVAL"] = 2] = "REQUIRES_APPROVAL";
  ToolCategory2[ToolCategory2["EXTERNAL"] = 3] = "EXTERNAL";
  ToolCategory2[ToolCategory2["RECOVERY_RETRYABLE"] = 4] = "RECOVERY_RETRYABLE";
  return ToolCategory2;
})(ToolCategory || {});
var HarnessService = /* @__PURE__ */ serviceDesc(file_threadline_v1_harness_service, 0);

// clients/typescript/src/gen/threadline/v1/thread_service_pb.ts
var file_threadline_v1_thread_service = /* @__PURE__ */ fileDesc("CiJ0aHJlYWRsaW5lL3YxL3RocmVhZF9zZXJ2aWNlLnByb3RvEg10aHJlYWRsaW5lLnYxIu4CChNDcmVhdGVUaHJlYWRSZXF1ZXN0EhEKCXRocmVhZF9pZBgBIAEoCRINCgVhZ2VudBgCIAEoCRI+CgZsYWJlbHMYAyADKAsyLi50aHJlYWRsaW5lLnYxLkNyZWF0ZVRocmVhZFJlcXVlc3QuTGFiZWxzRW50cnkSKgoFc3RhdGUYBCABKAsyGy50aHJlYWRsaW5lLnYxLkhhcm5lc3NTdGF0ZRI0CgdwZW5kaW5nGAUgASgLMiMudGhyZWFkbGluZS52MS5EZWZlcnJlZFRvb2xSZXF1ZXN0cxIzCghhY2NlcHRlZBgGIAEoCzIhLnRocmVhZGxpbmUudjEuRGVmZXJyZWRUb29sUmVzdW1lEi8KDGNsaWVudF90b29scxgHIAMoCzIZLnRocmVhZGxpbmUudjEuQ2xpZW50VG9vbBotCgtMYWJlbHNFbnRyeRILCgNrZXkYASABKAkSDQoFdmFsdWUYAiABKAk6AjgBIj0KFENyZWF0ZVRocmVhZFJlc3BvbnNlEiUKBnRocmVhZBgBIAEoCzIVLnRocmVhZGxpbmUudjEuVGhyZWFkIk4KEEdldFRocmVhZFJlcXVlc3QSEQoJdGhyZWFkX2lkGAEgASgJEicKBHZpZXcYAiABKA4yGS50aHJlYWRsaW5lLnYxLlRocmVhZFZpZXciOgoRR2V0VGhyZWFkUmVzcG9uc2USJQoGdGhyZWFkGAEgASgLMhUudGhyZWFkbGluZS52MS5UaHJlYWQieAoSTGlzdFRocmVhZHNSZXF1ZXN0EhEKCXBhZ2Vfc2l6ZRgBIAEoBRISCgpwYWdlX3Rva2VuGAIgASgJEg4KBmxhYmVscxgDIAMoCRIrCgZzdGF0dXMYBCABKA4yGy50aHJlYWRsaW5lLnYxLlRocmVhZFN0YXR1cyJWChNMaXN0VGhyZWFkc1Jlc3BvbnNlEiYKB3RocmVhZHMYASADKAsyFS50aHJlYWRsaW5lLnYxLlRocmVhZBIXCg9uZXh0X3BhZ2VfdG9rZW4YAiABKAkiQwoTRGVsZXRlVGhyZWFkUmVxdWVzdBIRCgl0aHJlYWRfaWQYASABKAkSGQoRZXhwZWN0ZWRfcmV2aXNpb24YAiABKAMiFgoURGVsZXRlVGhyZWFkUmVzcG9uc2UiUgoWTGlzdENoZWNrcG9pbnRzUmVxdWVzdBIRCgl0aHJlYWRfaWQYASABKAkSEQoJcGFnZV9zaXplGAIgASgFEhIKCnBhZ2VfdG9rZW4YAyABKAkiYgoXTGlzdENoZWNrcG9pbnRzUmVzcG9uc2USLgoLY2hlY2twb2ludHMYASADKAsyGS50aHJlYWRsaW5lLnYxLkNoZWNrcG9pbnQSFwoPbmV4dF9wYWdlX3Rva2VuGAIgASgJIjsKFEdldENoZWNrcG9pbnRSZXF1ZXN0EhEKCXRocmVhZF9pZBgBIAEoCRIQCghyZXZpc2lvbhgCIAEoAyJGChVHZXRDaGVja3BvaW50UmVzcG9uc2USLQoKY2hlY2twb2ludBgBIAEoCzIZLnRocmVhZGxpbmUudjEuQ2hlY2twb2ludCK8AQoRRm9ya1RocmVhZFJlcXVlc3QSEQoJdGhyZWFkX2lkGAEgASgJEhAKCHJldmlzaW9uGAIgASgDEhUKDW5ld190aHJlYWRfaWQYAyABKAkSPAoGbGFiZWxzGAQgAygLMiwudGhyZWFkbGluZS52MS5Gb3JrVGhyZWFkUmVxdWVzdC5MYWJlbHNFbnRyeRotCgtMYWJlbHNFbnRyeRILCgNrZXkYASABKAkSDQoFdmFsdWUYAiABKAk6AjgBIjsKEkZvcmtUaHJlYWRSZXNwb25zZRIlCgZ0aHJlYWQYASABKAsyFS50aHJlYWRsaW5lLnYxLlRocmVhZCJXChVSb2xsYmFja1RocmVhZFJlcXVlc3QSEQoJdGhyZWFkX2lkGAEgASgJEhAKCHJldmlzaW9uGAIgASgDEhkKEWV4cGVjdGVkX3JldmlzaW9uGAMgASgDIj8KFlJvbGxiYWNrVGhyZWFkUmVzcG9uc2USJQoGdGhyZWFkGAEgASgLMhUudGhyZWFkbGluZS52MS5UaHJlYWQimAMKDVRocmVhZFJ1blNwZWMSEQoJdGhyZWFkX2lkGAEgASgJEhIKCnJlcXVlc3RfaWQYAiABKAkSGQoRZXhwZWN0ZWRfcmV2aXNpb24YAyABKAMSDgoEdGV4dBgEIAEoCUgAEisKBXBhcnRzGAUgASgLMhoudGhyZWFkbGluZS52MS5Qcm9tcHRQYXJ0c0gAEjMKB2Fuc3dlcnMYBiABKAsyIi50aHJlYWRsaW5lLnYxLkRlZmVycmVkVG9vbFJlc3VsdHMSMgoNdG9vbF9yZWNvdmVyeRgHIAEoDjIbLnRocmVhZGxpbmUudjEuVG9vbFJlY292ZXJ5Ei8KDGNsaWVudF90b29scxgIIAMoCzIZLnRocmVhZGxpbmUudjEuQ2xpZW50VG9vbBIwCgx1c2FnZV9saW1pdHMYCSABKAsyGi50aHJlYWRsaW5lLnYxLlVzYWdlTGltaXRzEjIKDWJ1c3lfc3RyYXRlZ3kYCiABKA4yGy50aHJlYWRsaW5lLnYxLkJ1c3lTdHJhdGVneUIICgZwcm9tcHQiZAoWU3RyZWFtVGhyZWFkUnVuUmVxdWVzdBIqCgRzcGVjGAEgASgLMhwudGhyZWFkbGluZS52MS5UaHJlYWRSdW5TcGVjEh4KFm1heF9ldmVudHNfcGVyX21lc3NhZ2UYAiABKA0iagoXU3RyZWFtVGhyZWFkUnVuUmVzcG9uc2USJgoFZXZlbnQYASABKAsyFy50aHJlYWRsaW5lLnYxLlJ1bkV2ZW50EicKBmV2ZW50cxgCIAMoCzIXLnRocmVhZGxpbmUudjEuUnVuRXZlbnQiPgoQUnVuVGhyZWFkUmVxdWVzdBIqCgRzcGVjGAEgASgLMhwudGhyZWFkbGluZS52MS5UaHJlYWRSdW5TcGVjImEKEVJ1blRocmVhZFJlc3BvbnNlEigKBnJlc3VsdBgBIAEoCzIYLnRocmVhZGxpbmUudjEuUnVuUmVzdWx0EhAKCHJldmlzaW9uGAIgASgDEhAKCHJlcGxheWVkGAMgASgIIkMKFVN0YXJ0VGhyZWFkUnVuUmVxdWVzdBIqCgRzcGVjGAEgASgLMhwudGhyZWFkbGluZS52MS5UaHJlYWRSdW5TcGVjItIBChZTdGFydFRocmVhZFJ1blJlc3BvbnNlEg4KBnJ1bl9pZBgBIAEoCRISCgpyZXF1ZXN0X2lkGAIgASgJEhAKCHJldmlzaW9uGAMgASgDEi4KBnN0YXR1cxgEIAEoDjIeLnRocmVhZGxpbmUudjEuVGhyZWFkUnVuU3RhdHVzEhAKCHJlcGxheWVkGAUgASgIEigKBnJlc3VsdBgGIAEoCzIYLnRocmVhZGxpbmUudjEuUnVuUmVzdWx0EhYKDnF1ZXVlX3Bvc2l0aW9uGAcgASgNIk8KFkNhbmNlbFRocmVhZFJ1blJlcXVlc3QSEQoJdGhyZWFkX2lkGAEgASgJEg4KBnJ1bl9pZBgCIAEoCRISCgpyZXF1ZXN0X2lkGAMgASgJIkkKF0NhbmNlbFRocmVhZFJ1blJlc3BvbnNlEi4KBnN0YXR1cxgBIAEoDjIeLnRocmVhZGxpbmUudjEuVGhyZWFkUnVuU3RhdHVzIp0BChRKb2luVGhyZWFkUnVuUmVxdWVzdBIRCgl0aHJlYWRfaWQYASABKAkSDgoGcnVuX2lkGAIgASgJEhIKCnJlcXVlc3RfaWQYAyABKAkSGwoOYWZ0ZXJfc2VxdWVuY2UYBCABKARIAIgBARIeChZtYXhfZXZlbnRzX3Blcl9tZXNzYWdlGAUgASgNQhEKD19hZnRlcl9zZXF1ZW5jZSJoChVKb2luVGhyZWFkUnVuUmVzcG9uc2USJgoFZXZlbnQYASABKAsyFy50aHJlYWRsaW5lLnYxLlJ1bkV2ZW50EicKBmV2ZW50cxgCIAMoCzIXLnRocmVhZGxpbmUudjEuUnVuRXZlbnQiJwoSV2F0Y2hUaHJlYWRSZXF1ZXN0EhEKCXRocmVhZF9pZBgBIAEoCSKDAQoTV2F0Y2hUaHJlYWRSZXNwb25zZRIlCgZ0aHJlYWQYASABKAsyFS50aHJlYWRsaW5lLnYxLlRocmVhZBIXCg9jaGFuZ2Vfc2VxdWVuY2UYAiABKAQSLAoHY2hhbmdlcxgDIAMoDjIbLnRocmVhZGxpbmUudjEuVGhyZWFkQ2hhbmdlKlYKClRocmVhZFZpZXcSGwoXVEhSRUFEX1ZJRVdfVU5TUEVDSUZJRUQQABIVChFUSFJFQURfVklFV19CQVNJQxABEhQKEFRIUkVBRF9WSUVXX0ZVTEwQAiqbAQoMQnVzeVN0cmF0ZWd5Eh0KGUJVU1lfU1RSQVRFR1lfVU5TUEVDSUZJRUQQABIYChRCVVNZX1NUUkFURUdZX1JFSkVDVBABEhkKFUJVU1lfU1RSQVRFR1lfRU5RVUVVRRACEhsKF0JVU1lfU1RSQVRFR1lfSU5URVJSVVBUEAMSGgoWQlVTWV9TVFJBVEVHWV9ST0xMQkFDSxAEKvsBCgxUaHJlYWRDaGFuZ2USHQoZVEhSRUFEX0NIQU5HRV9VTlNQRUNJRklFRBAAEhoKFlRIUkVBRF9DSEFOR0VfU05BUFNIT1QQARIbChdUSFJFQURfQ0hBTkdFX0NPTU1JVFRFRBACEh0KGVRIUkVBRF9DSEFOR0VfUlVOX1NUQVJURUQQAxIbChdUSFJFQURfQ0hBTkdFX1JVTl9FTkRFRBAEEh0KGVRIUkVBRF9DSEFOR0VfUk9MTEVEX0JBQ0sQBRIXChNUSFJFQURfQ0hBTkdFX1FVRVVFEAYSHwobVEhSRUFEX0NIQU5HRV9MRUFTRV9FWFBJUkVEEAcyggoKDVRocmVhZFNlcnZpY2USVwoMQ3JlYXRlVGhyZWFkEiIudGhyZWFkbGluZS52MS5DcmVhdGVUaHJlYWRSZXF1ZXN0GiMudGhyZWFkbGluZS52MS5DcmVhdGVUaHJlYWRSZXNwb25zZRJOCglHZXRUaHJlYWQSHy50aHJlYWRsaW5lLnYxLkdldFRocmVhZFJlcXVlc3QaIC50aHJlYWRsaW5lLnYxLkdldFRocmVhZFJlc3BvbnNlElQKC0xpc3RUaHJlYWRzEiEudGhyZWFkbGluZS52MS5MaXN0VGhyZWFkc1JlcXVlc3QaIi50aHJlYWRsaW5lLnYxLkxpc3RUaHJlYWRzUmVzcG9uc2USVwoMRGVsZXRlVGhyZWFkEiIudGhyZWFkbGluZS52MS5EZWxldGVUaHJlYWRSZXF1ZXN0GiMudGhyZWFkbGluZS52MS5EZWxldGVUaHJlYWRSZXNwb25zZRJgCg9MaXN0Q2hlY2twb2ludHMSJS50aHJlYWRsaW5lLnYxLkxpc3RDaGVja3BvaW50c1JlcXVlc3QaJi50aHJlYWRsaW5lLnYxLkxpc3RDaGVja3BvaW50c1Jlc3BvbnNlEloKDUdldENoZWNrcG9pbnQSIy50aHJlYWRsaW5lLnYxLkdldENoZWNrcG9pbnRSZXF1ZXN0GiQudGhyZWFkbGluZS52MS5HZXRDaGVja3BvaW50UmVzcG9uc2USUQoKRm9ya1RocmVhZBIgLnRocmVhZGxpbmUudjEuRm9ya1RocmVhZFJlcXVlc3QaIS50aHJlYWRsaW5lLnYxLkZvcmtUaHJlYWRSZXNwb25zZRJdCg5Sb2xsYmFja1RocmVhZBIkLnRocmVhZGxpbmUudjEuUm9sbGJhY2tUaHJlYWRSZXF1ZXN0GiUudGhyZWFkbGluZS52MS5Sb2xsYmFja1RocmVhZFJlc3BvbnNlEmIKD1N0cmVhbVRocmVhZFJ1bhIlLnRocmVhZGxpbmUudjEuU3RyZWFtVGhyZWFkUnVuUmVxdWVzdBomLnRocmVhZGxpbmUudjEuU3RyZWFtVGhyZWFkUnVuUmVzcG9uc2UwARJOCglSdW5UaHJlYWQSHy50aHJlYWRsaW5lLnYxLlJ1blRocmVhZFJlcXVlc3QaIC50aHJlYWRsaW5lLnYxLlJ1blRocmVhZFJlc3BvbnNlEl0KDlN0YXJ0VGhyZWFkUnVuEiQudGhyZWFkbGluZS52MS5TdGFydFRocmVhZFJ1blJlcXVlc3QaJS50aHJlYWRsaW5lLnYxLlN0YXJ0VGhyZWFkUnVuUmVzcG9uc2USYAoPQ2FuY2VsVGhyZWFkUnVuEiUudGhyZWFkbGluZS52MS5DYW5jZWxUaHJlYWRSdW5SZXF1ZXN0GiYudGhyZWFkbGluZS52MS5DYW5jZWxUaHJlYWRSdW5SZXNwb25zZRJcCg1Kb2luVGhyZWFkUnVuEiMudGhyZWFkbGluZS52MS5Kb2luVGhyZWFkUnVuUmVxdWVzdBokLnRocmVhZGxpbmUudjEuSm9pblRocmVhZFJ1blJlc3BvbnNlMAESVgoLV2F0Y2hUaHJlYWQSIS50aHJlYWRsaW5lLnYxLldhdGNoVGhyZWFkUmVxdWVzdBoiLnRocmVhZGxpbmUudjEuV2F0Y2hUaHJlYWRSZXNwb25zZTABQrABChFkZXYudGhyZWFkbGluZS52MUISVGhyZWFkU2VydmljZVByb3RvUAFaTmdpdGh1Yi5jb20vdGhyZWFkbGluZS1kZXYvdGhyZWFkbGluZS9jbGllbnRzL2dvL2dlbi90aHJlYWRsaW5lL3YxO3RocmVhZGxpbmV2MaICA1RMTqoCDVRocmVhZGxpbmUuVjHKAg1UaHJlYWRsaW5lXFYx6gIOVGhyZWFkbGluZTo6VjFiBnByb3RvMw", [file_google_rpc_error_details, file_threadline_v1_deferred, file_threadline_v1_events, file_threadline_v1_run, file_threadline_v1_state, file_threadline_v1_thread]);
var ThreadRunSpecSchema = /* @__PURE__ */ messageDesc(file_threadline_v1_thread_service, 16);
var ThreadService = /* @__PURE__ */ serviceDesc(file_threadline_v1_thread_service, 0);

// clients/typescript/src/threads.ts
var RUN_RETRIES = 3;
var RETRY_BACKOFF_MS = 200;
var RECONNECT_RETRIES = 5;
function newRequestId() {
  return `req-${globalThis.crypto.randomUUID().replaceAll("-", "")}`;
}
var BUSY_STRATEGIES = {
  reject: 1 /* REJECT */,
  enqueue: 2 /* ENQUEUE */,
  interrupt: 3 /* INTERRUPT */,
  rollback: 4 /* ROLLBACK */
};
var ThreadRunStream = class {
  /** The thread the request runs. */
  threadId;
  /** The request's ID: send it again (same body) to retry without running twice. */
  requestId;
  #revision = 0n;
  #replayed = false;
  #result;
  #runId = "";
  #lastSequence;
  #events;
  /**
   * @param threadId - The thread the request runs.
   * @param requestId - The request ID the request carries.
   * @param open - Start the call; each event goes through the given function before it is yielded.
   */
  constructor(threadId, requestId, open) {
    this.threadId = threadId;
    this.requestId = requestId;
    this.#events = open((event) => this.#accept(event));
  }
  /** The revision of the latest checkpoint the stream reported committed; 0n before any. */
  get revision() {
    return this.#revision;
  }
  /** The attempt the stream follows (the run ID of its last event); "" before the first. */
  get runId() {
    return this.#runId;
  }
  /** The sequence of the last event yielded; undefined before the first (`joinRun`'s `afterSequence` to continue). */
  get lastSequence() {
    return this.#lastSequence;
  }
  /** True once the stream showed that it replays an already finished request. */
  get replayed() {
    return this.#replayed;
  }
  /** The run's outcome once its `result` event has been read; undefined before. */
  get outcome() {
    if (this.#result === void 0) {
      return void 0;
    }
    return { result: this.#result, revision: this.#revision, replayed: this.#replayed };
  }
  [Symbol.asyncIterator]() {
    return this;
  }
  /** The next event; the call starts with the first. */
  next() {
    return this.#events.next();
  }
  /** Stop reading and close the call (what leaving a `for await` loop does); the run goes on. */
  async return() {
    await this.close();
    return { done: true, value: void 0 };
  }
  /** Stop reading and close the call; the run itself goes on on the server. Idempotent. */
  async close() {
    await this.#events.return(void 0);
  }
  /**
   * Read the remaining events and return the run's outcome.
   *
   * @throws ThreadlineError as iterating does (`ProtocolError` when the stream ends without its
   *   result); `Error` when the stream was closed before its result.
   */
  async collect() {
    while ((await this.next()).done !== true) {
    }
    const outcome = this.outcome;
    if (outcome === void 0) {
      throw new Error("the stream was closed before its result");
    }
    return outcome;
  }
  #accept(event) {
    this.#runId = event.runId;
    this.#lastSequence = event.sequence;
    switch (event.event.case) {
      case "threadCommitted":
        this.#revision = event.event.value.revision;
        this.#replayed ||= event.event.value.replayed;
        break;
      case "result":
        this.#result = event.event.value;
        break;
      default:
        break;
    }
  }
};
var StartedRun = class {
  /** The thread it runs. */
  threadId;
  /**
   * The attempt that runs the request now (or ran it last, when `replayed`); QUEUED: the run ID its
   * first attempt will run under (join it, cancel it).
   */
  runId;
  /** The request's ID: `startRun` with it (and the same input) answers this request again. */
  requestId;
  /**
   * RUNNING: the head the run began from. QUEUED: the head when the start answered (the run begins
   * from whatever head its turn finds). Replayed: the revision of its terminal checkpoint.
   */
  revision;
  /**
   * RUNNING while the run goes on; QUEUED while the request waits in the thread's queue
   * (`busyStrategy: "enqueue"`, `"interrupt"` or `"rollback"`); for a request that had finished
   * (`replayed`), how it ended.
   */
  status;
  /**
   * QUEUED: the request's place in `Thread.queue` when the start answered (1 = next); 0 otherwise.
   * It moves up as the requests before it run or are cancelled, and an enqueued request moves down
   * when an interrupting one is accepted after it (it waits ahead): read `Thread.queue` for now.
   */
  queuePosition;
  /** True when the start answered a request that had already finished: nothing ran again. */
  replayed;
  /** When `replayed`, its outcome (`result` without `state`, `revision`, `replayed: true`); undefined while it runs. */
  outcome;
  #threads;
  #start;
  #runTimeoutMs;
  /** Made by `Threads.startRun`. */
  constructor(init) {
    const { response } = init;
    this.threadId = init.threadId;
    this.runId = response.runId;
    this.requestId = response.requestId;
    this.revision = response.revision;
    this.status = response.status;
    this.queuePosition = response.queuePosition;
    this.replayed = response.replayed;
    this.outcome = replayedOutcome(response);
    this.#threads = init.threads;
    this.#start = init.start;
    this.#runTimeoutMs = init.runTimeoutMs;
  }
  /**
   * Follow the run (`JoinThreadRun`), live or finished, as `joinRun` does: without `afterSequence`,
   * by its request ID, from its latest attempt's first event and on to its next attempts when one
   * is lost; with `afterSequence` k, the events of the attempt `runId` after k. A QUEUED request's
   * stream yields nothing until it starts (within `timeoutMs`, default the client's `runTimeoutMs`).
   *
   * @throws while iterating, as `joinRun`: e.g. `RunEventsExpired` once the log is past its
   *   retention (`result()` still reads the outcome), `Code.Unimplemented` with the log off.
   */
  events(options = {}) {
    const { afterSequence, ...rest } = options;
    return afterSequence === void 0 ? this.#threads.joinRun(this.threadId, { ...rest, requestId: this.requestId }) : this.#threads.joinRun(this.threadId, { ...rest, runId: this.runId, afterSequence });
  }
  /**
   * Wait for the request's end, following its next attempts, and return its outcome, as `run`
   * returns it (`replayed` when the start had already found it finished).
   *
   * It joins the request to its result (a QUEUED request's join waits for its turn first). When the
   * join cannot say how it ended (its attempt was
   * lost and the request closed without that attempt's result, its log is past its retention or
   * not kept), it sends the same `StartThreadRun` again, whose answer is the stored outcome, or
   * the request's error status (thrown); while that answers RUNNING (a next attempt not begun
   * yet), it waits (200 ms, doubling up to 3.2 s) and joins again. `timeoutMs` (default the
   * client's `runTimeoutMs`) bounds the whole wait.
   *
   * @throws ThreadlineError e.g. `RequestInterrupted` (its `attempts` lost their server),
   *   `ThreadNotFound`, `Code.DeadlineExceeded`; what its retry answers for a request that ended
   *   with an error status.
   */
  async result(options = {}) {
    if (this.outcome !== void 0) {
      return this.outcome;
    }
    const timeoutMs = options.timeoutMs ?? this.#runTimeoutMs;
    const deadline = timeoutMs > 0 ? Date.now() + timeoutMs : void 0;
    const left = () => deadline === void 0 ? 0 : Math.max(1, deadline - Date.now());
    for (let waits = 0; ; ) {
      try {
        return await this.#threads.joinRun(this.threadId, { ...options, requestId: this.requestId, timeoutMs: left() }).collect();
      } catch (err) {
        const error = ThreadlineError.from(err);
        if (!(error instanceof RunAttemptLost || error instanceof RunEventsExpired || error.code === Code.Unimplemented)) {
          throw error;
        }
      }
      const response = await this.#start({ ...options, timeoutMs: left() });
      const outcome = replayedOutcome(response);
      if (outcome !== void 0) {
        return outcome;
      }
      waits = Math.min(waits + 1, 5);
      await backoff(waits, options.signal);
    }
  }
  /**
   * Ask the run to stop (`CancelThreadRun`, as `Threads.cancel`); it ends CANCELLED with its
   * progress committed, which `result()` then returns. Returns the run record's status at once:
   * RUNNING while the run stops, CANCELLED when its server was gone or the request was still
   * QUEUED (taken out of the queue: it never runs), or how it had ended.
   */
  async cancel(options = {}) {
    return this.#threads.cancel(this.threadId, this.runId, options);
  }
};
function replayedOutcome(response) {
  if (!response.replayed) {
    return void 0;
  }
  const result = required(response.result, "StartThreadRunResponse.result");
  return { result, revision: response.revision, replayed: true };
}
var Threads = class {
  /** The generated Connect client, for anything `Threads` does not wrap (errors are not converted). */
  service;
  #unaryTimeoutMs;
  #runTimeoutMs;
  #maxEventsPerMessage;
  /** Made by `createThreadlineClient`; use `client.threads`. */
  constructor(config) {
    this.service = config.service;
    this.#unaryTimeoutMs = config.unaryTimeoutMs;
    this.#runTimeoutMs = config.runTimeoutMs;
    this.#maxEventsPerMessage = config.maxEventsPerMessage;
  }
  // --- threads ---------------------------------------------------------------------------------
  /**
   * Create a thread: empty, or importing a state the host held (e.g. from `HarnessService`).
   *
   * @throws ThreadExists when the ID is in use; `ThreadlineError` e.g. `STATE_INVALID`,
   *   `INPUT_INVALID`, `AGENT_UNKNOWN`, or a `pending` batch that does not match the state.
   */
  async create(options = {}) {
    const { threadId = "", agent = "", labels = {}, state, pending, accepted, clientTools = [], ...rest } = options;
    const response = await call(
      this.service.createThread({ threadId, agent, labels, state, pending, accepted, clientTools }, this.#unary(rest))
    );
    return required(response.thread, "CreateThreadResponse.thread");
  }
  /**
   * A thread as it is now; `{ full: true }` adds its head checkpoint's `state`. Its `queue` lists the
   * requests waiting for their turn (`busyStrategy: "enqueue"`, `"interrupt"` or `"rollback"`), in
   * the order they will run, each a `QueuedRun` (`requestId`, `runId` its first attempt will take,
   * `kind` `ENQUEUED`, `INTERRUPTING` or `ROLLING_BACK`, `createTime`).
   *
   * @throws ThreadNotFound when no thread has this ID.
   */
  async get(threadId, options = {}) {
    const { full = false, ...rest } = options;
    const view = full ? 2 /* FULL */ : 1 /* BASIC */;
    const response = await call(this.service.getThread({ threadId, view }, this.#unary(rest)));
    return required(response.thread, "GetThreadResponse.thread");
  }
  /** One page of `list`: its `threads` and the `nextPageToken` (empty on the last page). */
  async listPage(options = {}) {
    const { labels = {}, status = 0 /* UNSPECIFIED */, pageSize = 0, pageToken = "", ...rest } = options;
    const request = { labels: labelList(labels), status, pageSize, pageToken };
    return call(this.service.listThreads(request, this.#unary(rest)));
  }
  /**
   * Every matching thread, newest `updateTime` first, walking every page. Their `queue` is empty
   * (`get` reads it).
   *
   * ```ts
   * for await (const thread of client.threads.list({ labels: { user: "ada" } })) { ... }
   * ```
   */
  async *list(options = {}) {
    let pageToken = "";
    do {
      const page = await this.listPage({ ...options, pageToken });
      yield* page.threads;
      pageToken = page.nextPageToken;
    } while (pageToken !== "");
  }
  /**
   * Delete a thread with its checkpoints and run records.
   *
   * @throws ThreadNotFound; `ThreadBusy` while a run holds the thread; `RevisionConflict` when
   *   the head is not `expectedRevision`.
   */
  async delete(threadId, options = {}) {
    const { expectedRevision = 0n, ...rest } = options;
    await call(this.service.deleteThread({ threadId, expectedRevision: BigInt(expectedRevision) }, this.#unary(rest)));
  }
  /**
   * Branch a new thread from a committed checkpoint (default the head), with the same agent.
   *
   * The new thread's first checkpoint (FORKED, revision 1) keeps the source checkpoint's pending
   * batch, retained answers and client tools: a fork of a SUSPENDED checkpoint is SUSPENDED on
   * the same calls. Environment states are cleared (SPEC §1.5). The source may be running.
   *
   * @throws ThreadNotFound, CheckpointNotFound when there is no such source; `ThreadExists` when
   *   `newThreadId` is in use (the source's own ID is `FORK_THREAD_ID_CONFLICT`).
   */
  async fork(threadId, options = {}) {
    const { revision = 0n, newThreadId = "", labels = {}, ...rest } = options;
    const response = await call(
      this.service.forkThread({ threadId, revision: BigInt(revision), newThreadId, labels }, this.#unary(rest))
    );
    return required(response.thread, "ForkThreadResponse.thread");
  }
  /**
   * Make an earlier checkpoint current again, as a new head (ROLLED_BACK); nothing is deleted.
   * The thread's status follows the copied checkpoint: SUSPENDED again on its calls if it was,
   * and answering them again runs them again.
   *
   * @throws CheckpointNotFound; `ThreadBusy` while a run holds the thread; `RevisionConflict`
   *   when the head is not `expectedRevision`.
   */
  async rollback(threadId, revision, options = {}) {
    const { expectedRevision = 0n, ...rest } = options;
    const request = { threadId, revision: BigInt(revision), expectedRevision: BigInt(expectedRevision) };
    const response = await call(this.service.rollbackThread(request, this.#unary(rest)));
    return required(response.thread, "RollbackThreadResponse.thread");
  }
  // --- checkpoints -----------------------------------------------------------------------------
  /**
   * Every checkpoint of a thread, newest first, without its `state`, walking every page.
   *
   * @throws ThreadNotFound when no thread has this ID.
   */
  async *checkpoints(threadId, options = {}) {
    const { pageSize = 0, ...rest } = options;
    let pageToken = "";
    do {
      const page = await call(this.service.listCheckpoints({ threadId, pageSize, pageToken }, this.#unary(rest)));
      yield* page.checkpoints;
      pageToken = page.nextPageToken;
    } while (pageToken !== "");
  }
  /**
   * One checkpoint with its `state` and pending batch, e.g. the state a run's outcome points at.
   *
   * @throws ThreadNotFound; `CheckpointNotFound` when the thread has no such revision.
   */
  async checkpoint(threadId, revision, options = {}) {
    const response = await call(this.service.getCheckpoint({ threadId, revision: BigInt(revision) }, this.#unary(options)));
    return required(response.checkpoint, "GetCheckpointResponse.checkpoint");
  }
  // --- runs ------------------------------------------------------------------------------------
  /**
   * Run the thread's next turn and stream its events, `threadCommitted` then `result` last.
   *
   * ```ts
   * const stream = client.threads.stream(threadId, { text: "lookup grpc" });
   * for await (const event of stream) { ... }
   * const { result, revision, replayed } = stream.outcome!;
   * ```
   *
   * The stream reconnects by itself unless `reconnect: false`: after a transport failure
   * (UNAVAILABLE, a broken connection) it joins its run (`JoinThreadRun` with the run ID and the
   * last sequence it yielded), so the loop sees every event of the attempt once, in order; before
   * the first event it sends the request again with the same `requestId`, which attaches to a run
   * that started. When the attempt is lost (`RunAttemptLost`: its server crashed or was stopped
   * past its lease) it sends its request again (same `requestId`): the next attempt's events
   * follow, from its `runStarted`. Giving up (`RECONNECT_RETRIES` in a row), it throws the last
   * error. `timeoutMs` bounds the whole stream, reconnects included.
   *
   * With `reconnect: false` nothing is retried: after a transport error, send the same request
   * again with `requestId: stream.requestId` (a finished run is replayed, a running one attached to
   * from its first event), or `joinRun` from `stream.lastSequence`. Errors are thrown while
   * iterating: e.g. `ThreadBusy`, `ThreadQueueFull`, `RevisionConflict`, `ThreadNotSuspended`,
   * `RequestIdReused`, or a `DEFERRED_*` reason for the answers.
   *
   * With `busyStrategy: "enqueue"` (or `"interrupt"`, which also stops the running turn, or
   * `"rollback"`, which also discards it) on a busy
   * thread the request waits in the thread's queue: the stream yields nothing until it starts (within `timeoutMs`), then its attempt from `runStarted`.
   *
   * @throws TypeError at once when `input` has both `text` and `parts`, or an unknown `busyStrategy`.
   */
  stream(threadId, input = {}) {
    const spec = runSpec(threadId, input);
    const { reconnect = true } = input;
    const maxEventsPerMessage = this.#maxEventsPerMessage;
    const calls = this.#runCalls(threadId, input);
    const send = () => calls.open(
      (callOptions) => this.service.streamThreadRun({ spec, maxEventsPerMessage }, callOptions),
      "StreamThreadRunResponse.event or .events"
    );
    const reopen = (lost, at) => lost === void 0 && at !== void 0 ? calls.join({ runId: at.runId, afterSequence: at.sequence }) : send();
    return new ThreadRunStream(threadId, spec.requestId, (accept) => follow(send(), reconnect ? reopen : void 0, accept, input.signal));
  }
  /**
   * Follow one attempt of a thread run (`JoinThreadRun`): the events it already wrote, then each
   * new one as it is written, no gap and no repeat, ending as the run does (its `result`, or the
   * run's own error). A finished run in retention is replayed the same way; a queued request (by
   * its `requestId`, or the `runId` it was queued with) yields nothing until it starts. The events
   * are those `stream` yields, with the same sequences and contents, read the same way.
   *
   * ```ts
   * const joined = client.threads.joinRun(threadId, { runId }); // or { requestId }; neither: the running one, else the latest
   * for await (const event of joined) { ... }
   * const rest = client.threads.joinRun(threadId, { runId, afterSequence: 41n }); // the events after 41
   * ```
   *
   * It reconnects by itself unless `reconnect: false`: after a transport failure it joins again
   * from the last sequence it yielded. Joined by `requestId`, when the attempt is lost
   * (`RunAttemptLost`) it follows the request's next attempt once one runs, from that attempt's
   * first event (a new `runId`), waiting for one up to `RECONNECT_RETRIES` times (200 ms,
   * doubling); joined by `runId` only, or when the error says the request was closed (its
   * `requestStatus` not RUNNING: cancelled or interrupted without that attempt's result), a lost
   * attempt ends it with the error.
   *
   * Other ends: `RunEventsExpired` (the log is past its retention or was never recorded: a retry of
   * its request replays the result), `RunNotFound`, `ThreadNotFound`, `FollowerLimitReached`, and
   * `Code.Unimplemented` from a server started with `--event-log off`.
   */
  joinRun(threadId, options = {}) {
    const { runId = "", requestId = "", afterSequence, reconnect = true } = options;
    const calls = this.#runCalls(threadId, options);
    const first = () => calls.join({ runId, requestId, afterSequence: afterSequence === void 0 ? void 0 : BigInt(afterSequence) });
    const reopen = (lost, at) => {
      if (lost === void 0) {
        return at !== void 0 ? calls.join({ runId: at.runId, afterSequence: at.sequence }) : first();
      }
      if (requestId === "" || !requestMayGoOn(lost.requestStatus)) {
        return void 0;
      }
      return calls.join({ runId: lost.nextRunId, requestId });
    };
    return new ThreadRunStream(threadId, requestId, (accept) => follow(first(), reconnect ? reopen : void 0, accept, options.signal));
  }
  /**
   * Watch a thread (`WatchThread`): first a snapshot (`changes` = `[ThreadChange.SNAPSHOT]`), then
   * one update per change of what `Thread` shows (`COMMITTED`, `RUN_STARTED`, `RUN_ENDED`,
   * `ROLLED_BACK`, `QUEUE`, `LEASE_EXPIRED`; several in one when a slow reader's changes merged).
   *
   * ```ts
   * for await (const { thread, changeSequence, changes } of client.threads.watchThread(threadId)) { ... }
   * ```
   *
   * After a transport failure it reconnects (unless `reconnect: false`, up to `RECONNECT_RETRIES`
   * times in a row) and yields the new snapshot. Leaving the loop ends the call.
   *
   * @throws ThreadNotFound when the thread is deleted (or does not exist); `FollowerLimitReached`;
   *   `Code.Canceled` when `signal` aborts; the transport's error after the last retry.
   */
  async *watchThread(threadId, options = {}) {
    const { reconnect = true, ...rest } = options;
    let failures = 0;
    for (; ; ) {
      try {
        for await (const update of serverStream((callOptions) => this.service.watchThread({ threadId }, callOptions), connectOptions(rest, 0))) {
          failures = 0;
          yield update;
        }
        return;
      } catch (err) {
        const error = ThreadlineError.from(err);
        if (!reconnect || !retryable(error, rest.signal) || ++failures > RECONNECT_RETRIES) {
          throw error;
        }
        await backoff(failures, rest.signal);
      }
    }
  }
  /**
   * Run the thread's next turn and return its outcome (`RunThread`).
   *
   * UNAVAILABLE (the server unreachable, `STORE_UNAVAILABLE`) and transport failures (the
   * connection lost before the answer, also when that ends the call with `Code.Canceled` without
   * the caller's `signal`) are retried up to `RUN_RETRIES` times, 200 ms apart and
   * doubling, with the same request ID, so the run happens at most once; `replayed` says the
   * server answered it from its record. `timeoutMs` bounds the whole call, retries included.
   * With `busyStrategy: "enqueue"` (or `"interrupt"`, which also stops the running turn, or
   * `"rollback"`, which also discards it) on a busy
   * thread it waits in the thread's queue for its turn, within `timeoutMs` (a deadline ends the call, not the request: it stays queued and runs).
   *
   * @throws TypeError when `input` has both `text` and `parts`, or an unknown `busyStrategy`;
   *   `ThreadlineError` e.g. `ThreadBusy`, `ThreadQueueFull`, `RevisionConflict`,
   *   `ThreadNotSuspended`, `RequestIdReused`, `RequestInterrupted`, `LeaseLost`; the last failure
   *   once retries run out.
   */
  async run(threadId, input = {}) {
    const spec = runSpec(threadId, input);
    const response = await this.#retrying(input, this.#runTimeoutMs, (callOptions) => this.service.runThread({ spec }, callOptions));
    const result = required(response.result, "RunThreadResponse.result");
    return { result, revision: response.revision, replayed: response.replayed };
  }
  /**
   * Start the thread's next turn in the background (`StartThreadRun`) and return once the run holds
   * the thread, with no client: the server drives it to its end (a next attempt of its own if its
   * server is lost). `StartedRun` answers RUNNING with its `runId`, `requestId` and `revision` (the
   * head it began from); follow it with `events()`, wait for it with `result()`, stop it with
   * `cancel()`. With `busyStrategy: "enqueue"` on a busy thread it answers at once QUEUED, with its
   * `queuePosition` (1 = next) and the `runId` its first attempt will take; the server starts it in
   * its turn. With `"interrupt"` it answers QUEUED too, ahead of the enqueued requests, and the
   * running turn is asked to stop (it ends CANCELLED); with `"rollback"` likewise, and that turn's
   * commits are discarded before it runs. On a free thread it runs at once.
   *
   * ```ts
   * const started = await client.threads.startRun(threadId, { text: "summarise the logs", requestId: "job-7" });
   * const { result, revision } = await started.result();
   * ```
   *
   * The same `requestId` (and input) again answers the same request: QUEUED while it waits, RUNNING
   * while it runs (`runId` of its current attempt), then `replayed` with its `status` and `outcome`
   * (CANCELLED for a request cancelled in the queue). UNAVAILABLE
   * and transport failures are retried as `run` retries them, with the same request ID;
   * `timeoutMs` (default the client's unary `timeoutMs`) bounds the start, not the run.
   *
   * @throws TypeError when `input` has both `text` and `parts`, or an unknown `busyStrategy`;
   *   `ThreadlineError` as `run` throws before a run: e.g. `ThreadBusy`, `ThreadQueueFull`,
   *   `RevisionConflict`, `ThreadNotSuspended`, `RequestIdReused`, `ThreadNotFound`; for a finished request that ended with an error status,
   *   that status again (`RequestInterrupted`, …).
   */
  async startRun(threadId, input = {}) {
    const spec = runSpec(threadId, input);
    const start2 = (options) => this.#retrying(options, this.#unaryTimeoutMs, (callOptions) => this.service.startThreadRun({ spec }, callOptions));
    const response = await start2(input);
    return new StartedRun({ threads: this, threadId, response, start: start2, runTimeoutMs: this.#runTimeoutMs });
  }
  /**
   * One request sent until it is answered: UNAVAILABLE and transport failures retried up to
   * `RUN_RETRIES` times, 200 ms apart and doubling, within `options.timeoutMs` (default
   * `defaultTimeoutMs`) for the whole; each attempt gets what is left of it.
   */
  async #retrying(options, defaultTimeoutMs, send) {
    const timeoutMs = options.timeoutMs ?? defaultTimeoutMs;
    const deadline = timeoutMs > 0 ? Date.now() + timeoutMs : void 0;
    for (let attempt = 0; ; attempt++) {
      const left = deadline === void 0 ? 0 : Math.max(1, deadline - Date.now());
      try {
        return await call(send(connectOptions({ ...options, timeoutMs: left }, 0)));
      } catch (err) {
        const error = ThreadlineError.from(err);
        const backoff2 = RETRY_BACKOFF_MS * 2 ** attempt;
        if (!retryable(error, options.signal) || attempt === RUN_RETRIES || options.signal?.aborted === true || deadline !== void 0 && deadline - Date.now() <= backoff2) {
          throw error;
        }
        await call(sleep(backoff2, options.signal));
      }
    }
  }
  /**
   * Ask a thread's run to stop; it ends CANCELLED with its progress committed. Returns as soon as
   * the server recorded the request, before the run ends: RUNNING while the run stops, CANCELLED
   * when its server was gone and the record was closed at once, or when the request was still
   * queued (taken out of `Thread.queue`: it never runs), or the status of a run that had ended.
   *
   * @param runId - The run (`RunEvent.runId`, `Thread.lease.runId`, `ThreadBusy.runId`,
   *   `QueuedRun.runId`, `StartedRun.runId`).
   * @throws RunNotFound when the thread never had this run.
   */
  async cancel(threadId, runId, options = {}) {
    const response = await call(this.service.cancelThreadRun({ threadId, runId }, this.#unary(options)));
    return response.status;
  }
  /**
   * Ask the run of a request to stop, named by the request's ID (its latest attempt): for a host that
   * knows only the `requestId` it sent (its stream broke before `run_started`). Answers as `cancel`.
   *
   * @param requestId - The request (`ThreadRunInput.requestId`, `StartedRun.requestId`, `QueuedRun.requestId`).
   * @throws RunNotFound when the thread never had this request.
   */
  async cancelRequest(threadId, requestId, options = {}) {
    const response = await call(this.service.cancelThreadRun({ threadId, requestId }, this.#unary(options)));
    return response.status;
  }
  #unary(options) {
    return connectOptions(options, this.#unaryTimeoutMs);
  }
  /**
   * The calls of one thread run stream: each opened with what is left of the stream's deadline
   * (`options.timeoutMs`, default the client's `runTimeoutMs`), so reconnects stay within it.
   */
  #runCalls(threadId, options) {
    const timeoutMs = options.timeoutMs ?? this.#runTimeoutMs;
    const deadline = timeoutMs > 0 ? Date.now() + timeoutMs : void 0;
    const maxEventsPerMessage = this.#maxEventsPerMessage;
    const open = (start2, what) => {
      const left = deadline === void 0 ? 0 : Math.max(1, deadline - Date.now());
      return streamEvents(start2, connectOptions({ ...options, timeoutMs: left }, 0), what);
    };
    const join = (request) => open(
      (callOptions) => this.service.joinThreadRun({ threadId, maxEventsPerMessage, ...request }, callOptions),
      "JoinThreadRunResponse.event or .events"
    );
    return { open, join };
  }
};
async function* follow(events, reopen, accept, signal) {
  let at;
  let failures = 0;
  let lost = 0;
  for (; ; ) {
    try {
      for await (const event of events) {
        if (at !== void 0 && event.runId === at.runId && event.sequence <= at.sequence) {
          continue;
        }
        if (event.runId !== at?.runId) {
          lost = 0;
        }
        at = { runId: event.runId, sequence: event.sequence };
        failures = 0;
        accept(event);
        yield event;
      }
      return;
    } catch (err) {
      const error = ThreadlineError.from(err);
      let next;
      if (reopen !== void 0 && error instanceof RunAttemptLost && ++lost <= RECONNECT_RETRIES) {
        await backoff(lost, signal);
        next = reopen(error, at);
      } else if (reopen !== void 0 && (retryable(error, signal) || error instanceof ListenerTooSlow) && ++failures <= RECONNECT_RETRIES) {
        await backoff(failures, signal);
        next = reopen(void 0, at);
      }
      if (next === void 0) {
        throw error;
      }
      events = next;
    }
  }
}
function requestMayGoOn(status) {
  return status === 1 /* RUNNING */ || status === 0 /* UNSPECIFIED */;
}
async function backoff(attempt, signal) {
  await call(sleep(RETRY_BACKOFF_MS * 2 ** (attempt - 1), signal));
}
function runSpec(threadId, input) {
  const { text, parts: parts2, answers: answers2, requestId, expectedRevision = 0n, toolRecovery, clientTools = [], usageLimits, busyStrategy } = input;
  if (text !== void 0 && parts2 !== void 0) {
    throw new TypeError("give the prompt as text or as parts, not both");
  }
  if (busyStrategy !== void 0 && !Object.hasOwn(BUSY_STRATEGIES, busyStrategy)) {
    throw new TypeError(`busyStrategy must be "reject", "enqueue", "interrupt" or "rollback", not ${JSON.stringify(busyStrategy)}`);
  }
  return create(ThreadRunSpecSchema, {
    threadId,
    requestId: requestId || newRequestId(),
    expectedRevision: BigInt(expectedRevision),
    prompt: text !== void 0 ? { case: "text", value: text } : parts2 !== void 0 ? { case: "parts", value: parts2 } : void 0,
    answers: answers2,
    toolRecovery,
    clientTools,
    usageLimits,
    busyStrategy: busyStrategy === void 0 ? 0 /* UNSPECIFIED */ : BUSY_STRATEGIES[busyStrategy]
  });
}
function retryable(error, signal) {
  if (error.code === Code.Unavailable) {
    return true;
  }
  if (error.reason !== "") {
    return false;
  }
  if (error.code === Code.Canceled) {
    return signal?.aborted !== true;
  }
  const origin = error.cause.cause;
  return origin instanceof Error && typeof origin.code === "string";
}
function labelList(labels) {
  return Object.entries(labels).map(([key, value]) => `${key}=${value}`);
}
function sleep(ms, signal) {
  const aborted = () => Object.assign(new Error("The operation was aborted", { cause: signal?.reason }), { name: "AbortError" });
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(aborted());
      return;
    }
    const done = () => {
      signal?.removeEventListener("abort", abort);
      resolve();
    };
    const timer = setTimeout(done, ms);
    const abort = () => {
      clearTimeout(timer);
      reject(aborted());
    };
    signal?.addEventListener("abort", abort, { once: true });
  });
}

// clients/typescript/src/tracing.ts
var OTEL_API = "@opentelemetry/api";
var HEADER_SETTER = {
  set(carrier, key, value) {
    carrier.set(key, value);
  }
};
var api;
var loading;
function load() {
  loading ??= import(OTEL_API).then(
    (module) => {
      const found = typeof module.propagation?.inject === "function" ? module : module.default;
      api = typeof found?.propagation?.inject === "function" && found.context !== void 0 ? found : null;
    },
    () => {
      api = null;
    }
  );
  return loading;
}
var traceContextInterceptor = (next) => async (request) => {
  if (api === void 0) {
    await load();
  }
  api?.propagation.inject(api.context.active(), request.header, HEADER_SETTER);
  return next(request);
};

// clients/typescript/src/client.ts
var DEFAULT_TIMEOUT_MS = 3e4;
var DEFAULT_RUN_TIMEOUT_MS = 10 * 6e4;
var DEFAULT_MAX_EVENTS_PER_MESSAGE = 64;
var MAX_UINT32 = 4294967295;
function createThreadlineClient(options) {
  const maxEventsPerMessage = checkMaxEventsPerMessage(options.maxEventsPerMessage);
  const baseUrl = normalizeBaseUrl(options.baseUrl);
  const interceptors = [];
  if (options.token !== void 0 && options.token !== "") {
    const authorization = `Bearer ${options.token}`;
    interceptors.push((next) => (request) => {
      request.header.set("authorization", authorization);
      return next(request);
    });
  }
  interceptors.push(traceContextInterceptor, ...options.interceptors ?? []);
  const opened = options.transport === void 0 ? defaultTransport(baseUrl, interceptors) : { transport: options.transport, close: () => void 0 };
  const transport = opened.transport;
  const service = createClient(HarnessService, transport);
  const unaryTimeout = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const runTimeout = options.runTimeoutMs ?? DEFAULT_RUN_TIMEOUT_MS;
  const unary = (callOptions) => connectOptions(callOptions, unaryTimeout);
  const threads = new Threads({
    service: createClient(ThreadService, transport),
    unaryTimeoutMs: unaryTimeout,
    runTimeoutMs: runTimeout,
    maxEventsPerMessage
  });
  const newState = async (request = {}, callOptions) => {
    const response = await call(service.newState(request, unary(callOptions)));
    return required(response.state, "NewStateResponse.state");
  };
  const childSpec = async (request, input, callOptions) => {
    const { signal, headers } = callOptions ?? {};
    const start2 = () => newState({ threadId: request.threadId }, { signal, headers });
    return childRunInput(request, input, await childState(request, input, start2));
  };
  return {
    service,
    threads,
    streamRun(spec, callOptions) {
      const runSpec2 = toStreamRunSpec(spec);
      const histories = new CandidateHistories(runSpec2);
      return streamEvents(
        (options2) => service.streamRun({ spec: runSpec2, maxEventsPerMessage }, options2),
        connectOptions(callOptions, runTimeout),
        "StreamRunResponse.event or .events",
        // A candidate that does not rebuild throws, which cancels the run.
        (event) => histories.complete(event)
      );
    },
    async run(spec, callOptions) {
      const response = await call(service.run({ spec: toRunSpec(spec) }, connectOptions(callOptions, runTimeout)));
      return required(response.result, "RunResponse.result");
    },
    async runChild(request, input = {}, callOptions) {
      return this.run(await childSpec(request, input, callOptions), callOptions);
    },
    async *streamChild(request, input = {}, callOptions) {
      yield* this.streamRun(await childSpec(request, input, callOptions), callOptions);
    },
    newState,
    async forkState(state, callOptions = {}) {
      const { threadId = "", ...rest } = callOptions;
      const response = await call(service.forkState({ state, threadId }, unary(rest)));
      return required(response.state, "ForkStateResponse.state");
    },
    async validateState(source, callOptions) {
      const request = "$typeName" in source ? { source: { case: "state", value: source } } : { source: { case: "stateJson", value: source.stateJson } };
      const response = await call(service.validateState(request, unary(callOptions)));
      return { state: required(response.state, "ValidateStateResponse.state"), stateJson: response.stateJson };
    },
    async remainingDeferred(resume, state, callOptions) {
      const response = await call(service.remainingDeferred({ resume, state }, unary(callOptions)));
      return response.remaining;
    },
    async getServerInfo(callOptions) {
      return call(service.getServerInfo({}, unary(callOptions)));
    },
    close() {
      opened.close();
    }
  };
}
function toRunSpec(input) {
  const { prompt, ...rest } = input;
  return create(RunSpecSchema, {
    ...rest,
    prompt: typeof prompt === "string" ? { case: "text", value: prompt } : prompt
  });
}
function toStreamRunSpec(input) {
  const spec = toRunSpec(input);
  if (spec.checkpoints && spec.checkpointForm === 0 /* UNSPECIFIED */) {
    spec.checkpointForm = 2 /* DELTA */;
  }
  return spec;
}
function checkMaxEventsPerMessage(value) {
  if (value === void 0) {
    return DEFAULT_MAX_EVENTS_PER_MESSAGE;
  }
  if (!Number.isInteger(value) || value < 0 || value > MAX_UINT32) {
    const got = typeof value === "number" ? String(value) : JSON.stringify(value);
    throw new RangeError(
      `maxEventsPerMessage must be an integer from 0 to ${MAX_UINT32} (0 or 1 = one event per message), got ${got}`
    );
  }
  return value;
}
function normalizeBaseUrl(address) {
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(address) ? address : `http://${address}`;
}

// console/src/state.ts
var app = {
  baseUrl: "",
  token: "",
  client: void 0,
  info: void 0,
  list: { labels: {}, status: 0, pageToken: "", nextPageToken: "", page: 1 },
  open: void 0,
  loadSequence: 0,
  run: void 0
};
function client() {
  if (app.client === void 0) {
    throw new Error("The console is not connected to a server yet.");
  }
  return app.client;
}

// console/src/api.ts
var TOKEN_KEY = "threadline.console.token";
function serverUrl(location2) {
  const given = new URLSearchParams(location2.search).get("server");
  if (given === null || given === "") {
    return location2.origin;
  }
  const url = new URL(given);
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new TypeError(`?server= must be an http:// or https:// URL, not ${given}`);
  }
  return url.origin + url.pathname.replace(/\/+$/, "");
}
function loadToken() {
  try {
    return sessionStorage.getItem(TOKEN_KEY) ?? "";
  } catch {
    return "";
  }
}
function saveToken(token) {
  try {
    if (token === "") {
      sessionStorage.removeItem(TOKEN_KEY);
    } else {
      sessionStorage.setItem(TOKEN_KEY, token);
    }
  } catch {
  }
}
function connect() {
  app.client?.close();
  app.client = createThreadlineClient({ baseUrl: app.baseUrl, token: app.token });
}
async function storeHealth() {
  try {
    await client().threads.listPage({ pageSize: 1 });
    return { state: "serving" };
  } catch (err) {
    const error = ThreadlineError.from(err);
    if (error.code === Code.Unavailable || error.reason === "STORE_UNAVAILABLE") {
      return { state: "not serving", error };
    }
    if (error.code === Code.Unimplemented) {
      return { state: "not served", error };
    }
    return { state: "unknown", error };
  }
}

// console/src/dom.ts
function h(tag2, props = {}, ...children) {
  const element = document.createElement(tag2);
  for (const [name, value] of Object.entries(props)) {
    if (typeof value === "function") {
      element.addEventListener(name.replace(/^on/, ""), value);
    } else if (value === true) {
      element.setAttribute(name, "");
    } else if (value !== false && value !== null && value !== void 0) {
      element.setAttribute(name, String(value));
    }
  }
  element.append(...nodes(children));
  return element;
}
function nodes(children) {
  return children.filter((child) => child !== null && child !== void 0 && child !== false).map((child) => typeof child === "string" ? document.createTextNode(child) : child);
}
function byId(id, type) {
  const element = document.getElementById(id);
  if (!(element instanceof type)) {
    throw new Error(`index.html lacks a <${type.name}> with id "${id}"`);
  }
  return element;
}
function replaceContent(container, children, fallback) {
  const active = document.activeElement;
  const key = active instanceof HTMLElement && container.contains(active) ? active.dataset["key"] : void 0;
  const hadFocus = active instanceof HTMLElement && container.contains(active);
  container.replaceChildren(...nodes(children));
  if (!hadFocus) {
    return;
  }
  const again = key === void 0 ? null : container.querySelector(`[data-key="${CSS.escape(key)}"]`);
  (again ?? fallback)?.focus();
}
async function whileBusy(button, action) {
  if (button === null) {
    return action();
  }
  const wasDisabled = button.disabled;
  button.disabled = true;
  button.setAttribute("aria-busy", "true");
  try {
    return await action();
  } finally {
    button.removeAttribute("aria-busy");
    if (button.isConnected) {
      button.disabled = wasDisabled;
    }
  }
}
function prettyJson(text) {
  if (text.trim() === "") {
    return "";
  }
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}
function displayValue(value) {
  if (typeof value === "string") {
    return value;
  }
  const text = JSON.stringify(value, null, 2);
  return text === void 0 ? String(value) : text;
}

// console/src/errors.ts
function describeError(err) {
  if (err instanceof ThreadlineError) {
    const code = codeName(err.code).toUpperCase();
    const details = [`code: ${code}`];
    for (const [key, value] of Object.entries(err.metadata)) {
      details.push(`${key}: ${value}`);
    }
    for (const violation of err.fieldViolations) {
      details.push(`${violation.field}: ${violation.description}`);
    }
    if (unreachable(err)) {
      details.push(
        "The server did not answer: is it running with --http-port at this address, and does its --http-cors-origin name this page's origin?"
      );
    }
    return {
      title: err.reason !== "" ? err.reason : code,
      message: err.rawMessage !== "" ? err.rawMessage : err.message,
      details,
      conflict: err.reason === "REVISION_CONFLICT",
      unauthenticated: err.code === Code.Unauthenticated
    };
  }
  if (err instanceof Error) {
    return { title: err.name, message: err.message, details: [], conflict: false, unauthenticated: false };
  }
  return { title: "Error", message: String(err), details: [], conflict: false, unauthenticated: false };
}
function unreachable(err) {
  return err.reason === "" && (err.code === Code.Unavailable || err.code === Code.Unknown && /fetch|network/i.test(err.rawMessage));
}
function showError(source, err, options = {}) {
  const described = describeError(err);
  const box = byId("errors", HTMLElement);
  const entry = h(
    "div",
    { class: "error", "data-source": source },
    h("p", { class: "error-title" }, h("strong", {}, described.title), ` — ${described.message}`),
    described.details.length > 0 ? h("p", { class: "error-details" }, described.details.join(" · ")) : null
  );
  const actions = h("p", { class: "row" });
  if (described.conflict && options.reload !== void 0) {
    const reload = options.reload;
    actions.append(h("button", { type: "button", onclick: () => reload() }, "Reload thread"));
  }
  actions.append(h("button", { type: "button", class: "quiet", onclick: () => entry.remove() }, "Dismiss"));
  entry.append(actions);
  const said = `${described.title} — ${described.message}`;
  for (const other of box.querySelectorAll(".error")) {
    if (other.dataset["source"] !== source && other.querySelector(".error-title")?.textContent === said) {
      other.remove();
    }
  }
  const previous = box.querySelector(`[data-source="${source}"]`);
  if (previous === null) {
    box.append(entry);
  } else {
    previous.replaceWith(entry);
  }
  if (described.unauthenticated) {
    const note = byId("token-note", HTMLElement);
    const what = byId("token", HTMLInputElement).value === "" ? "a call without a token" : "this token";
    note.textContent = `UNAUTHENTICATED — the server refused ${what}: enter its --token above and choose Use token.`;
    note.classList.add("bad");
  }
}
function clearError(source) {
  byId("errors", HTMLElement).querySelector(`[data-source="${source}"]`)?.remove();
}
function guard(source, action, options = {}) {
  return (event) => {
    if (event.type === "submit") {
      event.preventDefault();
    }
    try {
      const done = action(event);
      if (done !== void 0) {
        done.catch((err) => showError(source, err, options));
      }
    } catch (err) {
      showError(source, err, options);
    }
  };
}
function installGlobalHandlers() {
  window.addEventListener("error", (event) => showError("page", event.error ?? event.message));
  window.addEventListener("unhandledrejection", (event) => showError("page", event.reason));
}

// console/src/format.ts
function enumName(values, value) {
  return values[value] ?? String(value);
}
function toDate(timestamp) {
  if (timestamp === void 0) {
    return void 0;
  }
  return new Date(Number(timestamp.seconds) * 1e3 + Math.floor(timestamp.nanos / 1e6));
}
function timeText(timestamp) {
  const date = toDate(timestamp);
  if (date === void 0 || Number.isNaN(date.getTime())) {
    return void 0;
  }
  return {
    iso: date.toISOString(),
    text: date.toLocaleString(void 0, { dateStyle: "short", timeStyle: "medium" })
  };
}
function labelItems(labels) {
  return Object.entries(labels).sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0).map(([key, value]) => `${key}=${value}`);
}
function parseLabels(text) {
  const labels = {};
  for (const item of text.split(/[,\s]+/).filter((part) => part !== "")) {
    const at = item.indexOf("=");
    if (at <= 0) {
      throw new LabelSyntaxError(`"${item}" is not key=value (labels are key=value, separated by commas or spaces).`);
    }
    labels[item.slice(0, at)] = item.slice(at + 1);
  }
  return labels;
}
var LabelSyntaxError = class extends SyntaxError {
  name = "Invalid labels";
};

// console/src/server.ts
var CATEGORY_TEXT = {
  [1 /* PLAIN */]: "plain",
  [2 /* REQUIRES_APPROVAL */]: "requires approval",
  [3 /* EXTERNAL */]: "external",
  [4 /* RECOVERY_RETRYABLE */]: "recovery-retryable"
};
var MODE_TEXT = {
  [1 /* INLINE */]: "inline",
  [2 /* HOST */]: "host-managed"
};
async function loadServer() {
  clearError("server");
  const body = byId("server-body", HTMLElement);
  body.setAttribute("aria-busy", "true");
  try {
    const [info, health] = await Promise.all([client().getServerInfo(), storeHealth()]);
    app.info = info;
    const note = byId("token-note", HTMLElement);
    note.textContent = "";
    note.classList.remove("bad");
    replaceContent(body, [facts(health), h("h3", {}, "Agents"), ...info.agents.map((agent) => agentView(agent, agent.name === info.defaultAgent))]);
    if (health.state === "unknown") {
      showError("server", health.error);
    }
  } catch (err) {
    app.info = void 0;
    replaceContent(body, [h("p", { class: "muted" }, "The server did not describe itself (see the error above).")]);
    throw err;
  } finally {
    body.removeAttribute("aria-busy");
  }
}
function facts(health) {
  const info = app.info;
  const store = info?.threadStore;
  const rows = [
    ["Address", app.baseUrl],
    ["Version", info?.serverVersion || "—"],
    ["Default agent", info?.defaultAgent || "—"],
    ["Thread store", store === void 0 ? "—" : enumName(ThreadStoreKind, store.kind)],
    ["Store health", healthView(health)]
  ];
  if (store !== void 0 && store.kind !== 4 /* NONE */) {
    rows.push(["Event log", store.eventLog ? "on" : "off"]);
    rows.push(["Queue limit", String(store.maxQueuedRuns)]);
  }
  return h("dl", { class: "facts" }, ...rows.flatMap(([term, value]) => [h("dt", {}, term), h("dd", {}, value)]));
}
function healthView(health) {
  if (health.state === "serving") {
    return h("span", { class: "good", "data-health": "serving" }, "serving");
  }
  if (health.state === "not served") {
    return h("span", { class: "muted", "data-health": health.state }, "not served (the server keeps no threads)");
  }
  const { title, message } = describeError(health.error);
  return h("span", { class: "bad", "data-health": health.state }, `${health.state} (${title} — ${message})`);
}
function agentView(agent, isDefault) {
  const counts = [
    plural(agent.tools.length, "tool"),
    agent.mounts.length === 0 ? "" : plural(agent.mounts.length, "mount"),
    agent.subagents.length === 0 ? "" : plural(agent.subagents.length, "child", "children")
  ].filter((count) => count !== "");
  return h(
    "details",
    { class: "agent", open: isDefault },
    h(
      "summary",
      {},
      h("strong", {}, agent.name),
      isDefault ? h("span", { class: "tag" }, "default") : null,
      h("span", { class: "muted small" }, ` ${counts.join(", ")}`)
    ),
    h("h4", {}, "Tools"),
    agent.tools.length === 0 ? h("p", { class: "muted" }, "none") : h(
      "ul",
      { class: "compact" },
      ...agent.tools.map(
        (tool) => h(
          "li",
          { title: tool.description },
          h("code", {}, tool.name),
          " — ",
          CATEGORY_TEXT[tool.category] ?? enumName(ToolCategory, tool.category),
          tool.recoveryRetryable && tool.category !== 4 /* RECOVERY_RETRYABLE */ ? ", recovery-retryable" : ""
        )
      )
    ),
    agent.mounts.length === 0 ? null : h(
      "div",
      {},
      h("h4", {}, "Mounts"),
      h(
        "ul",
        { class: "compact" },
        ...agent.mounts.map(
          (mount) => h(
            "li",
            {},
            h("code", {}, mount.name),
            ` — ${mount.providerKey}${mount.processCapable ? ", background processes" : ""}: ${mount.actions.join(", ")}`
          )
        )
      )
    ),
    agent.subagents.length === 0 ? null : h(
      "div",
      {},
      h("h4", {}, "Children"),
      h(
        "ul",
        { class: "compact" },
        ...agent.subagents.map(
          (child) => h(
            "li",
            { title: child.description },
            h("code", {}, child.name),
            ` — ${MODE_TEXT[child.mode] ?? enumName(SubagentMode, child.mode)}`,
            child.agent === "" ? "" : `, agent ${child.agent}`
          )
        )
      )
    )
  );
}
function plural(count, one, many = `${one}s`) {
  return `${count} ${count === 1 ? one : many}`;
}
function toolCategory(agent, tool) {
  return app.info?.agents.find((candidate) => candidate.name === agent)?.tools.find((candidate) => candidate.name === tool)?.category;
}

// console/src/dialog.ts
function confirmAction(question, detail = "") {
  const dialog = byId("confirm", HTMLDialogElement);
  byId("confirm-question", HTMLElement).textContent = question;
  const detailElement = byId("confirm-detail", HTMLElement);
  detailElement.textContent = detail;
  detailElement.hidden = detail === "";
  const before = document.activeElement;
  dialog.returnValue = "";
  return new Promise((resolve) => {
    dialog.addEventListener(
      "close",
      () => {
        if (before instanceof HTMLElement && before.isConnected) {
          before.focus();
        }
        resolve(dialog.returnValue === "confirm");
      },
      { once: true }
    );
    dialog.showModal();
    byId("confirm-cancel", HTMLButtonElement).focus();
  });
}

// console/src/conversation.ts
function renderConversation(data, context) {
  if (data === void 0 || data.trim() === "" || data.trim() === "[]") {
    return [h("p", { class: "muted" }, "No messages yet.")];
  }
  let messages;
  try {
    messages = JSON.parse(data);
  } catch (err) {
    return [h("p", { class: "bad" }, `The history is not readable JSON: ${err instanceof Error ? err.message : String(err)}`)];
  }
  if (!Array.isArray(messages)) {
    return [h("p", { class: "bad" }, "The history is not a list of messages."), h("pre", {}, displayValue(messages))];
  }
  const calls = /* @__PURE__ */ new Map();
  const waiting = waitingCalls(context.pending);
  const items = [];
  let instructions = "";
  for (const message of messages) {
    if (!isObject2(message)) {
      items.push(unknownItem("message", message));
      continue;
    }
    if (message["kind"] === "request") {
      const text = typeof message["instructions"] === "string" ? message["instructions"] : "";
      const shown = text !== "" && text !== instructions ? text : "";
      instructions = text || instructions;
      const item = requestItem(message, shown, calls, context);
      if (item !== void 0) {
        items.push(item);
      }
    } else if (message["kind"] === "response") {
      items.push(responseItem(message, calls, waiting));
    } else {
      items.push(unknownItem(`message of kind ${String(message["kind"])}`, message));
    }
  }
  return [h("ol", { class: "messages" }, ...items)];
}
function waitingCalls(pending) {
  const waiting = /* @__PURE__ */ new Map();
  for (const call2 of pending?.approvals ?? []) {
    waiting.set(call2.toolCallId, "awaiting approval");
  }
  for (const call2 of pending?.calls ?? []) {
    waiting.set(call2.toolCallId, call2.child === void 0 ? "awaiting result" : "awaiting child");
  }
  return waiting;
}
function requestItem(message, instructions, calls, context) {
  const body = [];
  let who = "";
  for (const part of parts(message)) {
    switch (part["part_kind"]) {
      case "user-prompt":
        who = "User";
        body.push(h("div", { class: "text" }, promptText(part["content"])));
        break;
      case "system-prompt":
        body.push(h("details", {}, h("summary", {}, "System prompt"), h("pre", {}, displayValue(part["content"]))));
        break;
      case "tool-return":
      case "builtin-tool-return": {
        const orphan = fillResult(part, calls, context);
        if (orphan !== void 0) {
          who ||= "Tool results";
          body.push(orphan);
        }
        break;
      }
      case "retry-prompt": {
        const orphan = fillRetry(part, calls);
        if (orphan !== void 0) {
          who ||= "Retry";
          body.push(orphan);
        }
        break;
      }
      default:
        body.push(unknownPart(part));
    }
  }
  if (body.length === 0) {
    return void 0;
  }
  return h(
    "li",
    { class: `message ${who === "User" ? "user" : "request"}` },
    h("p", { class: "who" }, who || "Request", timeOf(message)),
    instructions === "" ? null : h("details", {}, h("summary", {}, "Instructions"), h("pre", {}, instructions)),
    ...body
  );
}
function responseItem(message, calls, waiting) {
  const body = [];
  for (const part of parts(message)) {
    switch (part["part_kind"]) {
      case "text":
        body.push(h("div", { class: "text" }, displayValue(part["content"])));
        break;
      case "thinking":
        body.push(h("details", { class: "thinking" }, h("summary", {}, "Thinking"), h("pre", {}, displayValue(part["content"]))));
        break;
      case "tool-call":
      case "builtin-tool-call":
        body.push(callBlock(part, calls, waiting));
        break;
      default:
        body.push(unknownPart(part));
    }
  }
  const model = typeof message["model_name"] === "string" ? message["model_name"] : "";
  return h(
    "li",
    { class: "message model" },
    h("p", { class: "who" }, "Model", model === "" ? "" : h("span", { class: "muted" }, ` · ${model}`), timeOf(message)),
    ...body.length === 0 ? [h("p", { class: "muted" }, "(empty response)")] : body
  );
}
function callBlock(part, calls, waiting) {
  const toolName = stringField(part, "tool_name") || "(unnamed tool)";
  const callId2 = stringField(part, "tool_call_id");
  const args = part["args"];
  const argsText = typeof args === "string" ? prettyJson(args) : args === null || args === void 0 ? "" : displayValue(args);
  const awaiting = waiting.get(callId2);
  const status = h("span", { class: `tag ${awaiting === void 0 ? "" : "warn"}` }, awaiting ?? "no result yet");
  const result = h("div", { class: "result" });
  calls.set(callId2, { toolName, status, result });
  return h(
    "div",
    { class: "call", "data-call-id": callId2 },
    h(
      "p",
      { class: "call-head" },
      "Tool call ",
      h("code", {}, toolName),
      " ",
      status,
      callId2 === "" ? null : h("span", { class: "muted small" }, ` ${callId2}`)
    ),
    argsText === "" ? null : h("pre", { class: "args", "aria-label": `Arguments of ${toolName}` }, argsText),
    result
  );
}
function fillResult(part, calls, context) {
  const toolName = stringField(part, "tool_name");
  const outcome = stringField(part, "outcome") || "success";
  const content = displayValue(part["content"]);
  const view = calls.get(stringField(part, "tool_call_id"));
  const approval = context.category(toolName) === 2 /* REQUIRES_APPROVAL */;
  const label = outcome === "denied" ? "denied" : approval && outcome === "success" ? "approved, ran" : outcome;
  const block = h(
    "div",
    { class: `outcome outcome-${outcome}` },
    h("p", { class: "small" }, outcome === "denied" ? "Denied: " : "Result: "),
    h("pre", {}, content)
  );
  if (view === void 0) {
    const head = h("p", { class: "call-head" }, "Tool result ", h("code", {}, toolName || "(unnamed tool)"), " ", tag(label, outcome));
    return h("div", { class: "call" }, head, block);
  }
  view.status.replaceWith(tag(label, outcome));
  view.result.replaceChildren(block);
  return void 0;
}
function fillRetry(part, calls) {
  const content = displayValue(part["content"]);
  const block = h("div", { class: "outcome outcome-failed" }, h("p", { class: "small" }, "Retry asked: "), h("pre", {}, content));
  const view = calls.get(stringField(part, "tool_call_id"));
  if (view === void 0) {
    const toolName = stringField(part, "tool_name");
    return h("div", { class: "call error-part" }, h("p", { class: "call-head" }, "Retry prompt", toolName === "" ? "" : ` for ${toolName}`), block);
  }
  view.status.replaceWith(tag("retry", "failed"));
  view.result.replaceChildren(block);
  return void 0;
}
function tag(text, outcome) {
  const tone = outcome === "success" ? "good" : outcome === "denied" || outcome === "failed" ? "bad" : "warn";
  return h("span", { class: `tag ${tone}` }, text);
}
function promptText(content) {
  if (typeof content === "string") {
    return content;
  }
  if (Array.isArray(content)) {
    return content.map(promptItem).join("\n");
  }
  return displayValue(content);
}
function promptItem(item) {
  if (typeof item === "string") {
    return item;
  }
  if (!isObject2(item)) {
    return displayValue(item);
  }
  const url = typeof item["url"] === "string" ? `: ${item["url"]}` : "";
  return `[${String(item["kind"] ?? "item")}${url}]`;
}
function parts(message) {
  const list = message["parts"];
  if (!Array.isArray(list)) {
    return [];
  }
  return list.map((part) => isObject2(part) ? part : { part_kind: "(not an object)", value: part });
}
function unknownPart(part) {
  const kind = String(part["part_kind"] ?? "(no part_kind)");
  return h("details", { class: "unknown" }, h("summary", {}, `Part ${kind}`), h("pre", {}, displayValue(part)));
}
function unknownItem(what, value) {
  return h("li", { class: "message unknown" }, h("details", {}, h("summary", {}, `Unknown ${what}`), h("pre", {}, displayValue(value))));
}
function timeOf(message) {
  const stamp = message["timestamp"];
  if (typeof stamp !== "string") {
    return null;
  }
  const date = new Date(stamp);
  if (Number.isNaN(date.getTime())) {
    return null;
  }
  return h("time", { class: "muted small", datetime: date.toISOString() }, ` ${date.toLocaleTimeString()}`);
}
function stringField(object, key) {
  const value = object[key];
  return typeof value === "string" ? value : "";
}
function isObject2(value) {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

// console/src/live.ts
function startLive(container, title) {
  const log = h("ol", { class: "live-log" });
  container.replaceChildren(h("p", { class: "live-title" }, title), log);
  const parts2 = /* @__PURE__ */ new Map();
  const line = (...children) => {
    const item = h("li", {}, ...children);
    log.append(item);
    return item;
  };
  return {
    event(event) {
      const { value, case: kind } = event.event;
      switch (kind) {
        case "runStarted":
          parts2.clear();
          line(h("span", { class: "muted" }, "Run started: "), h("code", {}, event.runId));
          break;
        case "partStart": {
          const item = partLine(line, value.kind, value.toolName);
          parts2.set(value.partIndex, item);
          item.querySelector(".grow")?.append(value.kind === 3 /* TOOL_CALL */ ? value.argsJson : value.content);
          break;
        }
        case "partDelta": {
          let item = parts2.get(value.partIndex);
          if (item === void 0) {
            item = partLine(line, value.kind, value.toolNameDelta);
            parts2.set(value.partIndex, item);
          }
          item.querySelector(".grow")?.append(value.kind === 3 /* TOOL_CALL */ ? value.argsDelta : value.contentDelta);
          break;
        }
        case "partEnd": {
          const item = parts2.get(value.partIndex) ?? partLine(line, value.kind, value.toolName);
          const grow = item.querySelector(".grow");
          if (grow !== null) {
            grow.textContent = value.kind === 3 /* TOOL_CALL */ ? prettyJson(value.argsJson) : value.content;
          }
          parts2.delete(value.partIndex);
          break;
        }
        case "toolCall":
          line(h("span", { class: "muted" }, "Running tool "), h("code", {}, value.toolName), " ", h("code", { class: "small" }, value.argsJson));
          break;
        case "toolResult": {
          const outcome = enumName(ToolOutcome, value.outcome);
          line(
            h("span", { class: "muted" }, "Tool result "),
            h("code", {}, value.toolName),
            " ",
            h("span", { class: `tag ${value.outcome === 1 /* SUCCESS */ ? "good" : "bad"}` }, outcome),
            " ",
            h("span", {}, resultText(value.contentJson))
          );
          break;
        }
        case "inlineDelegation":
          line(h("span", { class: "muted" }, "Child "), h("code", {}, value.subagent), ` ${value.action}: ${value.status}`);
          break;
        case "threadCommitted":
          line(
            h(
              "span",
              { class: "muted" },
              `Committed checkpoint ${value.revision} (${enumName(CheckpointKind, value.kind)})${value.replayed ? ", replayed" : ""}`
            )
          );
          break;
        case "eventsOmitted":
          line(
            h("span", { class: "warn" }, `Events ${value.firstSequence}–${event.sequence} not recorded (${enumName(OmissionReason, value.reason)}).`)
          );
          break;
        case "result":
          resultLines(line, value);
          break;
        default:
          break;
      }
    },
    note(text, tone) {
      line(h("span", { class: tone ?? "muted" }, text));
    }
  };
}
function partLine(line, kind, toolName) {
  if (kind === 3 /* TOOL_CALL */) {
    return line(h("span", { class: "muted" }, "Model calls "), h("code", {}, toolName), " ", h("code", { class: "grow small" }));
  }
  if (kind === 2 /* THINKING */) {
    return line(h("span", { class: "muted" }, "Thinking: "), h("span", { class: "grow thinking" }));
  }
  return line(h("span", { class: "grow model-text" }));
}
function resultLines(line, result) {
  const status = enumName(RunStatus, result.status);
  const tone = result.status === 1 /* COMPLETED */ ? "good" : result.status === 2 /* SUSPENDED */ ? "warn" : "bad";
  line(h("span", { class: "muted" }, "Result: "), h("strong", { class: `result-status ${tone}`, "data-status": status }, status));
  if (result.outputJson !== "") {
    line(h("span", { class: "muted" }, "Output: "), resultText(result.outputJson));
  }
  if (result.failure !== void 0) {
    line(h("span", { class: "bad" }, `Failure ${result.failure.code}: ${result.failure.message}`));
  }
  const waiting = [
    ...(result.deferred?.approvals ?? []).map((call2) => `${call2.toolName} (approval)`),
    ...(result.deferred?.calls ?? []).map((call2) => `${call2.toolName} (result)`)
  ];
  if (waiting.length > 0) {
    line(h("span", { class: "warn" }, `Waiting on: ${waiting.join(", ")} — answer in Pending.`));
  }
}
function resultText(json) {
  try {
    const value = JSON.parse(json);
    return typeof value === "string" ? value : JSON.stringify(value);
  } catch {
    return json;
  }
}

// console/src/pending.ts
var AnswerError = class extends Error {
  name = "Answers not sent";
};
function renderPending(container, pending, submit, fallback) {
  const items = [...pending?.approvals ?? [], ...pending?.calls ?? []];
  const batch = items.map((call2) => call2.toolCallId).join("\n");
  if (container.dataset["batch"] === batch && container.childElementCount > 0) {
    return;
  }
  container.dataset["batch"] = batch;
  if (items.length === 0) {
    replaceContent(container, [h("p", { class: "muted" }, "Nothing pending.")], fallback);
    return;
  }
  const names = /* @__PURE__ */ new Map();
  const label = (call2) => {
    const seen = (names.get(call2.toolName) ?? 0) + 1;
    names.set(call2.toolName, seen);
    return seen === 1 ? call2.toolName : `${call2.toolName} (${seen})`;
  };
  const form = h(
    "form",
    { class: "pending-form", novalidate: true },
    ...(pending?.approvals ?? []).map((call2, index) => approvalItem(call2, label(call2), `a${index}`)),
    ...(pending?.calls ?? []).map((call2, index) => callItem(call2, label(call2), `c${index}`)),
    h("p", { class: "row" }, h("button", { type: "submit", id: "submit-answers", "data-key": "submit-answers" }, "Submit answers"))
  );
  form.addEventListener("submit", guard("thread", () => submit(collectAnswers(form))));
  form.addEventListener("click", guard("thread", (event) => choose(event)));
  const one = items.length === 1;
  const intro = `The thread waits on ${items.length} call${one ? "" : "s"}: answer ${one ? "it" : "each"}, then Submit answers.`;
  replaceContent(container, [h("p", {}, intro), form], fallback);
}
function approvalItem(call2, name, slot) {
  const messageId = `deny-${slot}-${domId(call2.toolCallId)}`;
  return h(
    "fieldset",
    { class: "pending-item", "data-call-id": call2.toolCallId, "data-kind": "approval", "data-answer": "" },
    h("legend", {}, "Approval: ", h("code", {}, name)),
    argsView(call2),
    h(
      "p",
      { class: "row" },
      h("button", { type: "button", "data-choice": "approve", "aria-pressed": "false", "data-key": `approve:${call2.toolCallId}` }, `Approve ${name}`),
      h("button", { type: "button", "data-choice": "deny", "aria-pressed": "false", "data-key": `deny:${call2.toolCallId}` }, `Deny ${name}`)
    ),
    h("label", { for: messageId }, `Denial message for ${name}`),
    h("input", { id: messageId, type: "text", "data-field": "message", autocomplete: "off" }),
    h("p", { class: "choice small", role: "status" }, "No answer yet.")
  );
}
function callItem(call2, name, slot) {
  const resultId = `result-${slot}-${domId(call2.toolCallId)}`;
  const what = call2.child !== void 0 ? "Child request" : call2.kind === 3 /* QUESTION */ ? "Question" : "External call";
  const request = call2.child;
  const child = request === void 0 ? null : h("p", { class: "small" }, `Run agent ${request.agent} on thread ${request.threadId}, then answer with its outcome.`);
  return h(
    "fieldset",
    { class: "pending-item", "data-call-id": call2.toolCallId, "data-kind": "call", "data-answer": "" },
    h("legend", {}, `${what}: `, h("code", {}, name)),
    argsView(call2),
    child,
    h("label", { for: resultId }, `Result for ${name}`),
    h("textarea", { id: resultId, rows: 3, "data-field": "result", spellcheck: "false", placeholder: '{"temperature": 21}' }),
    h(
      "p",
      { class: "row" },
      h("button", { type: "button", "data-choice": "result", "data-key": `result:${call2.toolCallId}` }, `Send result for ${name}`)
    ),
    h("p", { class: "choice small", role: "status" }, "No result yet (JSON).")
  );
}
function argsView(call2) {
  const args = prettyJson(call2.argsJson);
  return args === "" ? null : h("pre", { class: "args", "aria-label": `Arguments of ${call2.toolName}` }, args);
}
function choose(event) {
  const button = event.target instanceof Element ? event.target.closest("button[data-choice]") : null;
  const item = button?.closest("fieldset[data-call-id]");
  if (button == null || item == null) {
    return;
  }
  const choice = button.dataset["choice"] ?? "";
  const said = item.querySelector(".choice");
  if (choice === "result") {
    const text = field(item, "result").value;
    const value = parseResult(text, item);
    item.dataset["answer"] = "result";
    if (said !== null) {
      said.textContent = `Result ready: ${JSON.stringify(value)}`;
    }
    return;
  }
  item.dataset["answer"] = choice;
  for (const other of item.querySelectorAll("button[data-choice]")) {
    other.setAttribute("aria-pressed", String(other === button));
  }
  if (said !== null) {
    said.textContent = choice === "approve" ? "Will approve." : "Will deny (with the message above, if any).";
  }
}
function collectAnswers(form) {
  const answers2 = [];
  const missing2 = [];
  for (const item of form.querySelectorAll("fieldset[data-call-id]")) {
    const callId2 = item.dataset["callId"] ?? "";
    const name = item.querySelector("legend code")?.textContent ?? callId2;
    if (item.dataset["kind"] === "approval") {
      const answer = item.dataset["answer"];
      if (answer === "approve") {
        answers2.push(approve(callId2));
      } else if (answer === "deny") {
        answers2.push(deny(callId2, field(item, "message").value.trim()));
      } else {
        missing2.push(name);
      }
      continue;
    }
    const text = field(item, "result").value;
    if (text.trim() === "") {
      missing2.push(name);
    } else {
      answers2.push(callResult(callId2, parseResult(text, item)));
    }
  }
  if (missing2.length > 0) {
    throw new AnswerError(`Answer every pending call first; no answer for ${missing2.join(", ")}.`);
  }
  return answers2;
}
function parseResult(text, item) {
  const name = item.querySelector("legend code")?.textContent ?? "";
  if (text.trim() === "") {
    throw new AnswerError(`Result for ${name} is empty: write its JSON value (e.g. "done" or {"ok": true}).`);
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new AnswerError(`Result for ${name} is not JSON: ${err instanceof Error ? err.message : String(err)}`);
  }
}
function field(item, name) {
  const found = item.querySelector(`[data-field="${name}"]`);
  if (!(found instanceof HTMLInputElement || found instanceof HTMLTextAreaElement)) {
    throw new Error(`pending item without its ${name} field`);
  }
  return found;
}
function domId(callId2) {
  return callId2.replace(/[^A-Za-z0-9_-]/g, "_");
}

// console/src/threads.ts
var PAGE_SIZE = 20;
var STATUS_BY_VALUE = {
  "": 0 /* UNSPECIFIED */,
  IDLE: 1 /* IDLE */,
  RUNNING: 2 /* RUNNING */,
  SUSPENDED: 3 /* SUSPENDED */
};
function bindThreads(open) {
  const newForm = byId("new-thread-form", HTMLFormElement);
  newForm.addEventListener(
    "submit",
    guard("threads", async (event) => {
      clearError("threads");
      const idInput = byId("new-thread-id", HTMLInputElement);
      const labels = parseLabels(byId("new-thread-labels", HTMLInputElement).value);
      const thread = await whileBusy(submitter(event), () => client().threads.create({ threadId: idInput.value.trim(), labels }));
      idInput.value = "";
      await open(thread.threadId);
      await loadThreads();
    })
  );
  byId("filter-form", HTMLFormElement).addEventListener(
    "submit",
    guard("threads", async () => {
      readFilters();
      app.list.pageToken = "";
      app.list.page = 1;
      await loadThreads();
    })
  );
  byId("status-filter", HTMLSelectElement).addEventListener(
    "change",
    guard("threads", async () => {
      readFilters();
      app.list.pageToken = "";
      app.list.page = 1;
      await loadThreads();
    })
  );
  byId("next-page", HTMLButtonElement).addEventListener(
    "click",
    guard("threads", async () => {
      if (app.list.nextPageToken === "") {
        return;
      }
      app.list.pageToken = app.list.nextPageToken;
      app.list.page += 1;
      await loadThreads();
    })
  );
  byId("first-page", HTMLButtonElement).addEventListener(
    "click",
    guard("threads", async () => {
      app.list.pageToken = "";
      app.list.page = 1;
      await loadThreads();
    })
  );
  byId("thread-rows", HTMLElement).addEventListener(
    "click",
    guard("threads", async (event) => {
      const button = event.target instanceof Element ? event.target.closest("button[data-thread]") : null;
      const threadId = button?.dataset["thread"];
      if (threadId !== void 0) {
        await open(threadId);
      }
    })
  );
}
function submitter(event) {
  return event instanceof SubmitEvent && event.submitter instanceof HTMLButtonElement ? event.submitter : null;
}
function readFilters() {
  app.list.labels = parseLabels(byId("label-filter", HTMLInputElement).value);
  app.list.status = STATUS_BY_VALUE[byId("status-filter", HTMLSelectElement).value] ?? 0 /* UNSPECIFIED */;
}
async function loadThreads() {
  clearError("threads");
  const rows = byId("thread-rows", HTMLElement);
  const table = byId("thread-table", HTMLTableElement);
  table.setAttribute("aria-busy", "true");
  try {
    const { labels, status, pageToken } = app.list;
    let page;
    try {
      page = await client().threads.listPage({ labels, status, pageSize: PAGE_SIZE, pageToken });
    } catch (err) {
      if (!(err instanceof ThreadlineError && err.code === Code.Unimplemented)) {
        throw err;
      }
      app.list.nextPageToken = "";
      replaceContent(rows, [h("tr", {}, h("td", { colspan: 5, class: "muted" }, "This server keeps no threads (it runs with --store none)."))]);
      byId("threads-note", HTMLElement).textContent = "";
      return;
    }
    app.list.nextPageToken = page.nextPageToken;
    replaceContent(
      rows,
      page.threads.length === 0 ? [h("tr", {}, h("td", { colspan: 5, class: "muted" }, pageToken === "" ? "No threads." : "No more threads."))] : page.threads.map(row),
      byId("first-page", HTMLButtonElement)
    );
    const count = page.threads.length;
    byId("threads-note", HTMLElement).textContent = `Page ${app.list.page}: ${count} thread${count === 1 ? "" : "s"}${page.nextPageToken === "" ? "" : ", more on the next page"}.`;
  } finally {
    table.removeAttribute("aria-busy");
    byId("next-page", HTMLButtonElement).disabled = app.list.nextPageToken === "";
    byId("first-page", HTMLButtonElement).disabled = app.list.pageToken === "";
  }
}
function row(thread) {
  const isOpen = app.open?.thread.threadId === thread.threadId;
  const updated = timeText(thread.updateTime);
  const status = enumName(ThreadStatus, thread.status);
  return h(
    "tr",
    { class: isOpen ? "current" : "" },
    h(
      "td",
      { "data-label": "Thread ID" },
      h(
        "button",
        { type: "button", class: "link", "data-thread": thread.threadId, "data-key": `open:${thread.threadId}`, "aria-current": isOpen ? "true" : null },
        thread.threadId
      )
    ),
    h("td", { "data-label": "Status" }, h("span", { class: `status status-${status.toLowerCase()}` }, status)),
    h("td", { "data-label": "Revision" }, String(thread.revision)),
    h("td", { "data-label": "Labels" }, ...labelItems(thread.labels).map((label) => h("span", { class: "tag" }, label))),
    h("td", { "data-label": "Updated" }, updated === void 0 ? "—" : h("time", { datetime: updated.iso }, updated.text))
  );
}
function markCurrent() {
  const openId = app.open?.thread.threadId;
  for (const button of byId("thread-rows", HTMLElement).querySelectorAll("button[data-thread]")) {
    const isOpen = button.dataset["thread"] === openId;
    button.closest("tr")?.classList.toggle("current", isOpen);
    if (isOpen) {
      button.setAttribute("aria-current", "true");
    } else {
      button.removeAttribute("aria-current");
    }
  }
}

// console/src/thread.ts
var MAX_CHECKPOINTS = 500;
var OPEN_SCHEMA = JSON.stringify({ type: "object", additionalProperties: true });
function reloadAfterConflict() {
  byId("thread-title", HTMLElement).focus();
  reloadThread().catch(fail);
}
function fail(err) {
  showError("thread", err, { reload: reloadAfterConflict });
}
function act(action) {
  return guard("thread", action, { reload: reloadAfterConflict });
}
function bindThread() {
  const reload = byId("thread-reload", HTMLButtonElement);
  reload.addEventListener(
    "click",
    act(() => whileBusy(reload, reloadThread))
  );
  const runForm = byId("run-form", HTMLFormElement);
  runForm.addEventListener("submit", act(runPrompt));
  byId("prompt", HTMLTextAreaElement).addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      runForm.requestSubmit();
    }
  });
  byId("cancel-run", HTMLButtonElement).addEventListener("click", act(cancelRun));
  byId("delete-thread", HTMLButtonElement).addEventListener("click", act(deleteThread));
  byId("checkpoints", HTMLOListElement).addEventListener(
    "click",
    act(async (event) => {
      const button = event.target instanceof Element ? event.target.closest("button[data-action]") : null;
      const revision = BigInt(button?.dataset["revision"] ?? "0");
      if (button?.dataset["action"] === "fork") {
        await forkAt(revision);
      } else if (button?.dataset["action"] === "rollback") {
        await rollbackTo(revision);
      }
    })
  );
  byId("thread-note", HTMLElement).addEventListener(
    "click",
    act(async (event) => {
      const button = event.target instanceof Element ? event.target.closest("button[data-open]") : null;
      const threadId = button?.dataset["open"];
      if (threadId !== void 0) {
        await openThread(threadId, { focus: true });
      }
    })
  );
}
async function openThread(threadId, options = {}) {
  clearError("thread");
  const sequence = ++app.loadSequence;
  if (app.run !== void 0 && app.run.threadId !== threadId) {
    app.run.controller.abort();
    app.run = void 0;
  }
  const threads = client().threads;
  const [thread, listed] = await Promise.all([threads.get(threadId, { full: true }), listCheckpoints(threadId)]);
  if (sequence !== app.loadSequence) {
    return;
  }
  const changed = app.open?.thread.threadId !== threadId;
  app.open = { thread, checkpoints: listed.checkpoints, more: listed.more };
  byId("thread-note", HTMLElement).replaceChildren();
  if (changed) {
    byId("live", HTMLElement).replaceChildren(h("p", { class: "muted" }, "No run yet in this view."));
  }
  history.replaceState(null, "", `${location.pathname}${location.search}#thread=${encodeURIComponent(threadId)}`);
  render();
  markCurrent();
  if (options.focus === true) {
    byId("thread-title", HTMLElement).focus();
  }
  if (thread.status === 2 /* RUNNING */ && app.run === void 0) {
    void joinRunning().catch(fail);
  }
}
async function reloadThread() {
  const open = app.open;
  if (open !== void 0) {
    await openThread(open.thread.threadId);
  }
}
async function listCheckpoints(threadId) {
  const checkpoints = [];
  for await (const checkpoint of client().threads.checkpoints(threadId, { pageSize: 100 })) {
    if (checkpoints.length === MAX_CHECKPOINTS) {
      return { checkpoints, more: true };
    }
    checkpoints.push(checkpoint);
  }
  return { checkpoints, more: false };
}
function render() {
  const open = app.open;
  byId("thread-empty", HTMLElement).hidden = open !== void 0;
  byId("thread-view", HTMLElement).hidden = open === void 0;
  if (open === void 0) {
    return;
  }
  const { thread } = open;
  const status = enumName(ThreadStatus, thread.status);
  byId("thread-title", HTMLElement).textContent = thread.threadId;
  byId("thread-revision", HTMLElement).textContent = `Revision ${thread.revision}`;
  const statusElement = byId("thread-status", HTMLElement);
  statusElement.textContent = status;
  statusElement.className = `status status-${status.toLowerCase()}`;
  const created = timeText(thread.createTime);
  const facts2 = [`agent ${thread.agent}`];
  if (created !== void 0) {
    facts2.push(" · created ", h("time", { datetime: created.iso }, created.text));
  }
  if (thread.lease !== void 0) {
    facts2.push(" · running ", h("code", {}, thread.lease.runId));
  }
  if (thread.queue.length > 0) {
    facts2.push(` · ${thread.queue.length} request${thread.queue.length === 1 ? "" : "s"} queued`);
  }
  if (thread.recoveryPending) {
    facts2.push(" · recovery pending (the next run recovers the last one)");
  }
  byId("thread-facts", HTMLElement).replaceChildren(...facts2);
  const labels = labelItems(thread.labels);
  const labelNodes = labels.length === 0 ? ["no labels"] : labels.map((label) => h("span", { class: "tag" }, label));
  byId("thread-labels", HTMLElement).replaceChildren(...labelNodes);
  const items = open.checkpoints.map((checkpoint) => checkpointItem(checkpoint, thread.revision));
  const more = open.more ? h("li", { class: "muted" }, `Only the newest ${MAX_CHECKPOINTS} are listed.`) : null;
  replaceContent(byId("checkpoints", HTMLOListElement), [...items, more], byId("thread-title", HTMLElement));
  const context = { pending: thread.pending, category: (tool) => toolCategory(thread.agent, tool) };
  replaceContent(byId("conversation", HTMLElement), renderConversation(thread.head?.state?.messageHistory?.data, context));
  renderPending(byId("pending", HTMLElement), thread.pending, submitAnswers, byId("prompt", HTMLTextAreaElement));
  updateControls();
}
function clearView() {
  const parts2 = ["thread-title", "thread-revision", "thread-status", "thread-facts", "thread-labels", "thread-note"];
  for (const id of [...parts2, "conversation", "checkpoints", "pending", "live"]) {
    byId(id, HTMLElement).replaceChildren();
  }
  delete byId("pending", HTMLElement).dataset["batch"];
}
function checkpointItem(checkpoint, headRevision) {
  const revision = String(checkpoint.revision);
  const kind = enumName(CheckpointKind, checkpoint.kind);
  const pending = [...checkpoint.pending?.approvals ?? [], ...checkpoint.pending?.calls ?? []];
  const status = pending.length > 0 ? "SUSPENDED" : "IDLE";
  const when = timeText(checkpoint.createTime);
  const isHead = checkpoint.revision === headRevision;
  return h(
    "li",
    { class: `checkpoint kind-${kind.toLowerCase()}${isHead ? " head" : ""}`, "data-revision": revision },
    h(
      "p",
      { class: "checkpoint-head" },
      h("span", { class: "rev" }, `#${revision}`),
      " ",
      h("span", { class: "tag" }, kind),
      " ",
      h("span", { class: `status status-${status.toLowerCase()}` }, status),
      pending.length > 0 ? h("span", { class: "small" }, ` on ${pending.map((call2) => call2.toolName).join(", ")}`) : null,
      isHead ? h("span", { class: "tag good" }, "head") : null
    ),
    h(
      "p",
      { class: "small muted checkpoint-facts" },
      when === void 0 ? "" : h("time", { datetime: when.iso }, when.text),
      checkpoint.runId === "" ? "" : h("span", {}, " · ", h("code", {}, checkpoint.runId)),
      checkpoint.requestId === "" ? "" : h("span", {}, " · ", h("code", {}, checkpoint.requestId))
    ),
    h(
      "p",
      { class: "row" },
      h("button", { type: "button", "data-action": "fork", "data-revision": revision, "data-key": `fork:${revision}` }, `Fork at ${revision}`),
      h(
        "button",
        { type: "button", "data-action": "rollback", "data-revision": revision, "data-key": `rollback:${revision}` },
        `Roll back to ${revision}`
      )
    )
  );
}
function updateControls() {
  const open = app.open;
  const streaming = app.run !== void 0 && app.run.threadId === open?.thread.threadId;
  byId("run", HTMLButtonElement).disabled = streaming;
  const submit = document.getElementById("submit-answers");
  if (submit instanceof HTMLButtonElement) {
    submit.disabled = streaming;
  }
  const running = open?.thread.status === 2 /* RUNNING */ && open.thread.lease !== void 0;
  byId("cancel-run", HTMLButtonElement).disabled = !(streaming && app.run?.runId !== "" || running);
}
async function runPrompt() {
  const prompt = byId("prompt", HTMLTextAreaElement);
  const text = prompt.value;
  const names = byId("client-tools", HTMLInputElement).value.split(/[,\s]+/).filter((name) => name !== "");
  const clientTools = names.map((name) => ({ name, parametersJsonSchema: OPEN_SCHEMA }));
  const title = text.trim() === "" ? "Continuing without a prompt" : `Prompt: ${text}`;
  const ended = await runTurn(text.trim() === "" ? { clientTools } : { text, clientTools }, title);
  if (ended && prompt.value === text) {
    prompt.value = "";
  }
}
async function submitAnswers(list) {
  const count = list.length;
  await runTurn({ answers: answers(...list) }, `Answering ${count} pending call${count === 1 ? "" : "s"}`);
}
async function runTurn(input, title) {
  const open = app.open;
  if (open === void 0) {
    return false;
  }
  if (app.run !== void 0) {
    throw new Error("A run is already streaming here; wait for it or cancel it.");
  }
  clearError("thread");
  const threadId = open.thread.threadId;
  const controller = new AbortController();
  const view = startLive(byId("live", HTMLElement), title);
  const stream = client().threads.stream(threadId, { ...input, expectedRevision: open.thread.revision, signal: controller.signal });
  return follow2({ controller, threadId, runId: "", view }, stream);
}
async function joinRunning() {
  const thread = app.open?.thread;
  if (thread?.lease === void 0 || app.info?.threadStore?.eventLog !== true) {
    return;
  }
  const { threadId } = thread;
  const { runId } = thread.lease;
  const controller = new AbortController();
  const view = startLive(byId("live", HTMLElement), `Following run ${runId} (started elsewhere)`);
  await follow2({ controller, threadId, runId, view }, client().threads.joinRun(threadId, { runId, signal: controller.signal }));
}
async function follow2(run, events) {
  const { view } = run;
  app.run = run;
  updateControls();
  let started = false;
  let ended = false;
  try {
    for await (const event of events) {
      started = true;
      if (run.runId !== event.runId) {
        run.runId = event.runId;
        updateControls();
      }
      view.event(event);
      ended ||= event.event.case === "result";
    }
  } catch (err) {
    if (run.controller.signal.aborted) {
      view.note("Stopped following this run here; it goes on on the server.");
      return false;
    }
    view.note("The run was refused or its stream failed: see the error above.", "bad");
    fail(err);
  } finally {
    if (app.run === run) {
      app.run = void 0;
    }
    updateControls();
  }
  if (started && app.open?.thread.threadId === run.threadId) {
    await reloadThread();
    await loadThreads().catch((err) => showError("threads", err));
  }
  if (document.activeElement === null || document.activeElement === document.body) {
    byId("prompt", HTMLTextAreaElement).focus();
  }
  return ended;
}
async function cancelRun() {
  const open = app.open;
  const runId = app.run?.threadId === open?.thread.threadId && app.run?.runId ? app.run.runId : open?.thread.lease?.runId ?? "";
  if (open === void 0 || runId === "") {
    return;
  }
  if (!await confirmAction(`Cancel run ${runId}?`, "It stops at once and ends CANCELLED; what it did so far stays committed.")) {
    return;
  }
  clearError("thread");
  const status = await client().threads.cancel(open.thread.threadId, runId);
  const text = `Cancel asked: the run is ${enumName(ThreadRunStatus, status)}.`;
  if (app.run !== void 0) {
    app.run.view.note(text, "warn");
  } else {
    await reloadThread();
    byId("thread-note", HTMLElement).replaceChildren(text);
  }
}
async function forkAt(revision) {
  const open = app.open;
  if (open === void 0) {
    return;
  }
  const threadId = open.thread.threadId;
  const question = `Fork ${threadId} at checkpoint ${revision}?`;
  const detail = "A new thread starts from this checkpoint, with the same agent (suspended on the same calls if it was). This thread is not changed.";
  if (!await confirmAction(question, detail)) {
    return;
  }
  clearError("thread");
  const fork = await client().threads.fork(threadId, { revision });
  byId("thread-note", HTMLElement).replaceChildren(
    `Forked checkpoint ${revision} into `,
    h("code", {}, fork.threadId),
    ". ",
    h("button", { type: "button", "data-open": fork.threadId }, "Open forked thread")
  );
  await loadThreads().catch((err) => showError("threads", err));
}
async function rollbackTo(revision) {
  const open = app.open;
  if (open === void 0) {
    return;
  }
  const { threadId, revision: head } = open.thread;
  const question = `Roll ${threadId} back to checkpoint ${revision}?`;
  const detail = `A new head (#${head + 1n}, ROLLED_BACK) copies checkpoint ${revision}; nothing is deleted. Refused unless the head is still #${head}.`;
  if (!await confirmAction(question, detail)) {
    return;
  }
  clearError("thread");
  const thread = await client().threads.rollback(threadId, revision, { expectedRevision: head });
  await reloadThread();
  byId("thread-note", HTMLElement).replaceChildren(`Rolled back: checkpoint ${revision} copied as the new head #${thread.revision}.`);
  await loadThreads().catch((err) => showError("threads", err));
}
async function deleteThread() {
  const open = app.open;
  if (open === void 0) {
    return;
  }
  const { threadId, revision } = open.thread;
  const detail = `Its checkpoints and run records are deleted for good. Refused unless the head is still #${revision}.`;
  if (!await confirmAction(`Delete thread ${threadId}?`, detail)) {
    return;
  }
  clearError("thread");
  await client().threads.delete(threadId, { expectedRevision: revision });
  app.loadSequence++;
  app.open = void 0;
  history.replaceState(null, "", `${location.pathname}${location.search}`);
  render();
  clearView();
  byId("thread-gone", HTMLElement).textContent = `Deleted thread ${threadId}.`;
  markCurrent();
  await loadThreads().catch((err) => showError("threads", err));
  byId("thread-empty-title", HTMLElement).focus();
}

// console/src/main.ts
async function loadAll() {
  const threadId = app.open?.thread.threadId ?? threadInUrl();
  const server = loadServer().catch((err) => showError("server", err));
  await Promise.all([
    server,
    loadThreads().catch((err) => showError("threads", err)),
    threadId === void 0 ? void 0 : server.then(() => openThread(threadId)).catch((err) => showError("thread", err))
  ]);
}
function threadInUrl() {
  const match = /^#thread=(.+)$/.exec(location.hash);
  return match?.[1] === void 0 ? void 0 : decodeURIComponent(match[1]);
}
function start() {
  installGlobalHandlers();
  app.baseUrl = serverUrl(location);
  app.token = loadToken();
  byId("server-address", HTMLElement).textContent = `Server: ${app.baseUrl}`;
  const tokenInput = byId("token", HTMLInputElement);
  tokenInput.value = app.token;
  connect();
  const useToken = guard("server", async () => {
    app.token = tokenInput.value;
    saveToken(app.token);
    connect();
    clearError("page");
    await loadAll();
  });
  tokenInput.addEventListener("change", useToken);
  byId("token-form", HTMLFormElement).addEventListener("submit", useToken);
  byId("server-check", HTMLButtonElement).addEventListener("click", guard("server", loadServer));
  bindThreads((threadId) => openThread(threadId, { focus: true }));
  bindThread();
  void loadAll();
}
try {
  start();
} catch (err) {
  showError("page", err);
}
