// Minimal JSON reader/writer for the quicbed ns-3 channel program.
//
// Reads the description quicbed writes (objects, arrays, strings, numbers, booleans,
// null); no external dependency so that building needs only libns3-dev and g++.
#pragma once

#include <cmath>
#include <cstring>
#include <cstdint>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace qbjson
{

class Value
{
  public:
    enum Kind
    {
        NUL,
        BOOL,
        NUMBER,
        STRING,
        ARRAY,
        OBJECT
    };

    Kind kind = NUL;
    bool b = false;
    double n = 0;
    std::string s;
    std::vector<Value> a;
    std::map<std::string, Value> o;

    bool Has(const std::string& key) const
    {
        return kind == OBJECT && o.count(key) && o.at(key).kind != NUL;
    }

    const Value& operator[](const std::string& key) const
    {
        static const Value null;
        if (kind != OBJECT)
        {
            throw std::runtime_error("JSON: '" + key + "' looked up in a non-object");
        }
        auto it = o.find(key);
        return it == o.end() ? null : it->second;
    }

    const Value& At(const std::string& key) const
    {
        if (!Has(key))
        {
            throw std::runtime_error("JSON: missing field '" + key + "'");
        }
        return o.at(key);
    }

    double Num(const std::string& key, double fallback) const
    {
        return Has(key) ? At(key).AsNum() : fallback;
    }

    std::string Str(const std::string& key, const std::string& fallback) const
    {
        return Has(key) ? At(key).AsStr() : fallback;
    }

    bool Bool(const std::string& key, bool fallback) const
    {
        return Has(key) ? At(key).AsBool() : fallback;
    }

    double AsNum() const
    {
        if (kind != NUMBER)
        {
            throw std::runtime_error("JSON: expected a number");
        }
        return n;
    }

    const std::string& AsStr() const
    {
        if (kind != STRING)
        {
            throw std::runtime_error("JSON: expected a string");
        }
        return s;
    }

    bool AsBool() const
    {
        if (kind != BOOL)
        {
            throw std::runtime_error("JSON: expected true or false");
        }
        return b;
    }

    const std::vector<Value>& Arr() const
    {
        static const std::vector<Value> empty;
        if (kind == NUL)
        {
            return empty;
        }
        if (kind != ARRAY)
        {
            throw std::runtime_error("JSON: expected an array");
        }
        return a;
    }
};

class Parser
{
  public:
    explicit Parser(const std::string& text)
        : m_text(text)
    {
    }

    Value Parse()
    {
        Value v = ParseValue();
        SkipSpace();
        if (m_pos != m_text.size())
        {
            Fail("trailing characters");
        }
        return v;
    }

  private:
    const std::string& m_text;
    size_t m_pos = 0;

    [[noreturn]] void Fail(const std::string& what)
    {
        throw std::runtime_error("JSON: " + what + " at offset " + std::to_string(m_pos));
    }

    void SkipSpace()
    {
        while (m_pos < m_text.size() && isspace(static_cast<unsigned char>(m_text[m_pos])))
        {
            m_pos++;
        }
    }

    bool Consume(const char* word)
    {
        size_t len = std::char_traits<char>::length(word);
        if (m_text.compare(m_pos, len, word) == 0)
        {
            m_pos += len;
            return true;
        }
        return false;
    }

    Value ParseValue()
    {
        SkipSpace();
        if (m_pos >= m_text.size())
        {
            Fail("unexpected end");
        }
        Value v;
        char c = m_text[m_pos];
        if (c == '{')
        {
            v.kind = Value::OBJECT;
            m_pos++;
            SkipSpace();
            if (m_text[m_pos] == '}')
            {
                m_pos++;
                return v;
            }
            for (;;)
            {
                SkipSpace();
                if (m_text[m_pos] != '"')
                {
                    Fail("expected a key");
                }
                std::string key = ParseString();
                SkipSpace();
                if (m_text[m_pos++] != ':')
                {
                    Fail("expected ':'");
                }
                v.o[key] = ParseValue();
                SkipSpace();
                if (m_text[m_pos] == ',')
                {
                    m_pos++;
                    continue;
                }
                if (m_text[m_pos] == '}')
                {
                    m_pos++;
                    return v;
                }
                Fail("expected ',' or '}'");
            }
        }
        if (c == '[')
        {
            v.kind = Value::ARRAY;
            m_pos++;
            SkipSpace();
            if (m_text[m_pos] == ']')
            {
                m_pos++;
                return v;
            }
            for (;;)
            {
                v.a.push_back(ParseValue());
                SkipSpace();
                if (m_text[m_pos] == ',')
                {
                    m_pos++;
                    continue;
                }
                if (m_text[m_pos] == ']')
                {
                    m_pos++;
                    return v;
                }
                Fail("expected ',' or ']'");
            }
        }
        if (c == '"')
        {
            v.kind = Value::STRING;
            v.s = ParseString();
            return v;
        }
        if (Consume("true"))
        {
            v.kind = Value::BOOL;
            v.b = true;
            return v;
        }
        if (Consume("false"))
        {
            v.kind = Value::BOOL;
            return v;
        }
        if (Consume("null"))
        {
            return v;
        }
        size_t end = m_pos;
        while (end < m_text.size() && strchr("+-0123456789.eE", m_text[end]))
        {
            end++;
        }
        if (end == m_pos)
        {
            Fail("unexpected character");
        }
        v.kind = Value::NUMBER;
        v.n = std::stod(m_text.substr(m_pos, end - m_pos));
        m_pos = end;
        return v;
    }

    std::string ParseString()
    {
        std::string out;
        m_pos++; // opening quote
        while (m_pos < m_text.size() && m_text[m_pos] != '"')
        {
            char c = m_text[m_pos++];
            if (c == '\\')
            {
                char e = m_text[m_pos++];
                switch (e)
                {
                case 'n':
                    out += '\n';
                    break;
                case 't':
                    out += '\t';
                    break;
                case 'r':
                    out += '\r';
                    break;
                case 'b':
                    out += '\b';
                    break;
                case 'f':
                    out += '\f';
                    break;
                case 'u': {
                    unsigned code = std::stoul(m_text.substr(m_pos, 4), nullptr, 16);
                    m_pos += 4;
                    out += code < 0x80 ? static_cast<char>(code) : '?';
                    break;
                }
                default:
                    out += e;
                }
            }
            else
            {
                out += c;
            }
        }
        if (m_pos >= m_text.size())
        {
            Fail("unterminated string");
        }
        m_pos++; // closing quote
        return out;
    }
};

inline Value
Parse(const std::string& text)
{
    return Parser(text).Parse();
}

/// A string as a JSON literal.
inline std::string
Quote(const std::string& s)
{
    std::ostringstream out;
    out << '"';
    for (char c : s)
    {
        switch (c)
        {
        case '"':
            out << "\\\"";
            break;
        case '\\':
            out << "\\\\";
            break;
        case '\n':
            out << "\\n";
            break;
        default:
            if (static_cast<unsigned char>(c) < 0x20)
            {
                char buf[8];
                snprintf(buf, sizeof(buf), "\\u%04x", c);
                out << buf;
            }
            else
            {
                out << c;
            }
        }
    }
    out << '"';
    return out.str();
}

/// A histogram (bucket -> count) as a JSON object with the buckets as keys.
inline std::string
Counts(const std::map<uint32_t, uint64_t>& histogram)
{
    std::ostringstream out;
    out << "{";
    bool first = true;
    for (auto& [bucket, count] : histogram)
    {
        out << (first ? "" : ", ") << "\"" << bucket << "\": " << count;
        first = false;
    }
    out << "}";
    return out.str();
}

/// A number as a JSON literal (non-finite values become null).
inline std::string
Num(double x)
{
    if (!std::isfinite(x))
    {
        return "null";
    }
    std::ostringstream out;
    out.precision(10);
    out << x;
    return out.str();
}

} // namespace qbjson
